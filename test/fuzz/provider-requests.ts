import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { ProviderId } from '../../proxy/providers/adapter.ts';
import type { RawRequest } from './raw-http.ts';

/** The error format a provider's refusals come in. */
export type ErrorFamily = 'openai' | 'anthropic' | 'gemini';

export type RouteKind = 'metered' | 'free' | 'unclassified' | 'denied';

/** One provider endpoint, as an agent's SDK would call it. */
export interface Endpoint {
  name: string;
  provider: ProviderId;
  family: ErrorFamily;
  /** The real upstream authority (`api.openai.com`, `compat.local:8000`). */
  host: string;
  /** The listener's reverse prefix for the provider, when it has one. */
  reverse?: string;
  kind: RouteKind;
  method: 'POST' | 'GET';
  path(model: string, stream: boolean): string;
  /** A well-formed body; mutations break it afterwards. */
  body(p: BodyParams): unknown;
}

export interface BodyParams {
  model: unknown;
  text: unknown;
  maxTokens: unknown;
  stream: unknown;
  toolName: string;
}

const AZURE = 'myres.openai.azure.com';
export const COMPAT = 'compat.local:8000';
const OPENAI_HOST = 'api.openai.com';
const ANTHROPIC_HOST = 'api.anthropic.com';
const GEMINI_HOST = 'generativelanguage.googleapis.com';

/** The upstream hosts the proxy must send to the fuzzing upstream. */
export const UPSTREAM_HOSTS = [OPENAI_HOST, ANTHROPIC_HOST, GEMINI_HOST, AZURE, 'compat.local'];

function defined(entries: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(entries).filter(([, v]) => v !== undefined));
}

const tools = (name: string) => [{ type: 'function', function: { name, parameters: { type: 'object' } } }];

const chat = (p: BodyParams) =>
  defined({
    model: p.model,
    messages: [{ role: 'user', content: p.text }],
    max_tokens: p.maxTokens,
    stream: p.stream,
    tools: tools(p.toolName),
  });
const responses = (p: BodyParams) =>
  defined({ model: p.model, input: p.text, max_output_tokens: p.maxTokens, stream: p.stream });
const embeddings = (p: BodyParams) => defined({ model: p.model, input: p.text });
const completions = (p: BodyParams) =>
  defined({ model: p.model, prompt: p.text, max_tokens: p.maxTokens, stream: p.stream });
const geminiContents = (p: BodyParams) =>
  defined({
    contents: [{ role: 'user', parts: [{ text: p.text }] }],
    generationConfig: defined({ maxOutputTokens: p.maxTokens }),
  });

function openAiFamily(provider: ProviderId, host: string, base: string, reverse?: string): Endpoint[] {
  const at = (path: string) => () => `${base}${path}`;
  const common = { provider, family: 'openai' as const, host, ...(reverse !== undefined ? { reverse } : {}) };
  return [
    { ...common, name: `${provider} chat`, kind: 'metered', method: 'POST', path: at('/chat/completions'), body: chat },
    {
      ...common,
      name: `${provider} responses`,
      kind: 'metered',
      method: 'POST',
      path: at('/responses'),
      body: responses,
    },
    {
      ...common,
      name: `${provider} embeddings`,
      kind: 'metered',
      method: 'POST',
      path: at('/embeddings'),
      body: embeddings,
    },
    {
      ...common,
      name: `${provider} completions`,
      kind: 'metered',
      method: 'POST',
      path: at('/completions'),
      body: completions,
    },
    {
      ...common,
      name: `${provider} moderations`,
      kind: 'free',
      method: 'POST',
      path: at('/moderations'),
      body: embeddings,
    },
    {
      ...common,
      name: `${provider} images`,
      kind: 'unclassified',
      method: 'POST',
      path: at('/images/generations'),
      body: (p) => defined({ model: p.model, prompt: p.text }),
    },
    {
      ...common,
      name: `${provider} batches`,
      kind: 'denied',
      method: 'POST',
      path: at('/batches'),
      body: embeddings,
    },
    {
      ...common,
      name: `${provider} models`,
      kind: 'unclassified',
      method: 'GET',
      path: at('/models'),
      body: () => undefined,
    },
  ];
}

/** A path segment for any string, lone surrogates included. */
const segment = (text: string) => encodeURIComponent(text.toWellFormed());

const geminiPath = (verb: string) => (model: string, stream: boolean) =>
  `/v1beta/models/${segment(model)}:${verb}${verb === 'streamGenerateContent' && stream ? '?alt=sse' : ''}`;

/** Every adapter's endpoints: OpenAI (four metered operations), Anthropic, Gemini, Azure OpenAI, OpenAI-compatible. */
export const ENDPOINTS: readonly Endpoint[] = [
  ...openAiFamily('openai', OPENAI_HOST, '/v1', '/openai'),
  ...openAiFamily('openai-compatible', COMPAT, '/v1'),
  {
    name: 'azure chat',
    provider: 'azure-openai',
    family: 'openai',
    host: AZURE,
    kind: 'metered',
    method: 'POST',
    path: (model) => `/openai/deployments/${segment(model)}/chat/completions?api-version=2024-10-21`,
    body: (p) => {
      const { model: _model, ...rest } = chat(p);
      return rest;
    },
  },
  {
    name: 'azure v1 responses',
    provider: 'azure-openai',
    family: 'openai',
    host: AZURE,
    kind: 'metered',
    method: 'POST',
    path: () => '/openai/v1/responses',
    body: responses,
  },
  {
    name: 'azure embeddings',
    provider: 'azure-openai',
    family: 'openai',
    host: AZURE,
    kind: 'metered',
    method: 'POST',
    path: (model) => `/openai/deployments/${segment(model)}/embeddings?api-version=2024-10-21`,
    body: embeddings,
  },
  {
    name: 'anthropic messages',
    provider: 'anthropic',
    family: 'anthropic',
    host: ANTHROPIC_HOST,
    reverse: '/anthropic',
    kind: 'metered',
    method: 'POST',
    path: () => '/v1/messages',
    body: (p) =>
      defined({
        model: p.model,
        max_tokens: p.maxTokens,
        messages: [{ role: 'user', content: p.text }],
        stream: p.stream,
        tools: [{ name: p.toolName, input_schema: { type: 'object' } }],
      }),
  },
  {
    name: 'anthropic count_tokens',
    provider: 'anthropic',
    family: 'anthropic',
    host: ANTHROPIC_HOST,
    reverse: '/anthropic',
    kind: 'free',
    method: 'POST',
    path: () => '/v1/messages/count_tokens',
    body: (p) => defined({ model: p.model, messages: [{ role: 'user', content: p.text }] }),
  },
  ...(
    [
      ['generateContent', 'metered'],
      ['streamGenerateContent', 'metered'],
      ['embedContent', 'metered'],
      ['batchEmbedContents', 'metered'],
      ['countTokens', 'free'],
      ['batchGenerateContent', 'denied'],
    ] as const
  ).map(([verb, kind]): Endpoint => ({
    name: `gemini ${verb}`,
    provider: 'gemini',
    family: 'gemini',
    host: GEMINI_HOST,
    reverse: '/gemini',
    kind,
    method: 'POST',
    path: geminiPath(verb),
    body: (p) =>
      verb === 'embedContent'
        ? { content: { parts: [{ text: p.text }] } }
        : verb === 'batchEmbedContents'
          ? { requests: [{ model: `models/${String(p.model)}`, content: { parts: [{ text: p.text }] } }] }
          : geminiContents(p),
  })),
];

/** `arbitrary` once in `every` draws, else `none`. */
export function sometimes<T, N>(arbitrary: fc.Arbitrary<T>, every: number, none: N): fc.Arbitrary<T | N> {
  return fc.oneof({ weight: every - 1, arbitrary: fc.constant(none) }, { weight: 1, arbitrary });
}

/** Models by provider: priced ones, one a policy denies, unknown ones, and odd strings. */
const MODELS: Record<ProviderId, string[]> = {
  openai: ['gpt-4o-mini', 'gpt-4o', 'text-embedding-3-small', 'gpt-3.5-turbo'],
  'openai-compatible': ['llama-3-8b', 'gpt-4o-mini'],
  'azure-openai': ['gpt-4o-mini', 'my-deployment'],
  anthropic: ['claude-3-5-haiku', 'claude-sonnet-4', 'gpt-3.5-turbo'],
  gemini: ['gemini-2.0-flash', 'gemini-2.5-pro', 'gpt-3.5-turbo'],
};

/** A model a policy denies (`llm:gpt-3.5-turbo`). */
export const DENIED_MODEL = 'gpt-3.5-turbo';
/** A tool a policy denies; no answer the agent receives may call it. */
export const DENIED_TOOL = 'shell';

/** Strings a tokenizer, a JSON reader or a header writer may trip on. */
export const oddText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }), // lone surrogates included
  fc.constantFrom(
    '',
    '\u0000',
    '\u202e\u2066evil',
    '\ufeff',
    'e\u0301\u0301\u0301',
    '🙂'.repeat(200),
    'a'.repeat(20_000),
    '<|endoftext|>',
    '<|im_start|>system',
    '\ud800',
    '\udfff\ud800',
  ),
);

/** Values that are the wrong type, out of range or absurd for any field. */
export const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, -0, 1.5, 1e308, -1e308, 2 ** 53 + 1, 1e-300, '', '1', 'true', [], {}),
  fc.integer(),
  fc.double({ noNaN: true }),
  oddText,
  fc.jsonValue({ maxDepth: 3 }),
);

function modelOf(provider: ProviderId): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...MODELS[provider]) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('my-model', 'models/gemini-2.0-flash', 'GPT-4O', 'gpt-4o\u0000', 'gpt-4o-2024-08-06'),
    },
    { weight: 1, arbitrary: oddValue },
  );
}

/** A JSON path inside `value` (object keys and array indexes), chosen by `pick`. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = prefix.length > 0 ? [prefix] : [];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  return out;
}

function setAt(value: unknown, path: readonly (string | number)[], replacement: unknown, remove: boolean): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  if (Array.isArray(value)) {
    const copy = [...value];
    if (remove && rest.length === 0) copy.splice(Number(head), 1);
    else copy[Number(head)] = setAt(copy[Number(head)], rest, replacement, remove);
    return copy;
  }
  if (typeof value === 'object' && value !== null) {
    const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
    if (remove && rest.length === 0) delete copy[String(head)];
    else copy[String(head)] = setAt(copy[String(head)], rest, replacement, remove);
    return copy;
  }
  return value;
}

interface Mutation {
  at: number;
  remove: boolean;
  value: unknown;
}

function mutate(value: unknown, mutations: readonly Mutation[]): unknown {
  let out = value;
  for (const m of mutations) {
    const all = paths(out);
    if (all.length === 0) return m.value;
    out = setAt(out, all[m.at % all.length]!, m.value, m.remove);
  }
  return out;
}

/** Text-level damage to a JSON body: what a serializer never writes but an attacker does. */
const textDamage: fc.Arbitrary<(text: string) => string> = fc.oneof(
  fc.constant((t: string) => t),
  fc.nat().map((n) => (t: string) => t.slice(0, n % (t.length + 1))),
  fc.constantFrom(
    // One key twice: which one a server keeps is its own choice.
    (t: string) => t.replace('{', '{"model":"gpt-4o",'),
    (t: string) => t.replace('{', '{"stream":true,'),
    (t: string) => t.replace(/}$/, ',"model":"o1-pro"}'),
    (t: string) => t.replace(/}$/, ',"max_tokens":1e999}'),
    (t: string) => t.replace('"model"', '"mod\\u0065l"'),
    (t: string) => `${t}garbage`,
    (t: string) => `${t}\n${t}`,
    (t: string) => ` \t\r\n${t} \n`,
    (t: string) => t.replace(/:/g, ' : '),
    (t: string) => t.replace(/"/g, "'"),
    (t: string) => t.replace(/true|false/g, 'NaN'),
    (t: string) => `/* c */${t}`,
  ),
);

/** Bodies no schema describes: deeply nested, or simply not JSON. */
const strangeBody: fc.Arbitrary<string> = fc.oneof(
  fc
    .integer({ min: 10, max: 60_000 })
    .map((d) => `{"model":"gpt-4o-mini","messages":${'['.repeat(d)}${']'.repeat(d)}}`),
  fc
    .integer({ min: 10, max: 30_000 })
    .map(
      (d) =>
        `{"model":"gpt-4o-mini","messages":[{"role":"user","content":${'[{"type":"text","content":'.repeat(d)}"x"${'}]'.repeat(d)}}]}`,
    ),
  fc.integer({ min: 10, max: 20_000 }).map((d) => `${'{"a":'.repeat(d)}1${'}'.repeat(d)}`),
  fc.constantFrom('', '{', '[', 'null', '0', '"x"', '[]', '{}', '{"__proto__":{"model":"gpt-4o"}}', 'NaN'),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.string({ unit: 'binary', maxLength: 200 }),
);

export interface EncodedBody {
  bytes: Buffer;
  /** Header fields describing it (content-type, content-encoding). */
  headers: [string, string][];
}

function utf16be(text: string): Buffer {
  const le = Buffer.from(text, 'utf16le');
  for (let i = 0; i + 1 < le.length; i += 2) [le[i], le[i + 1]] = [le[i + 1]!, le[i]!];
  return le;
}

/** How a body's text becomes bytes and what the headers claim about it. */
const encoding: fc.Arbitrary<(text: string) => EncodedBody> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.constant((t: string) => ({
      bytes: Buffer.from(t),
      headers: [['content-type', 'application/json']] as [string, string][],
    })),
  },
  fc.constantFrom(
    (t: string) => ({
      bytes: Buffer.from(`\ufeff${t}`),
      headers: [['content-type', 'application/json']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [['content-type', 'application/json; charset=utf-8']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [['content-type', 'application/json; charset=utf-16le']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [['content-type', 'application/json; charset=iso-8859-1']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [['content-type', 'application/json; charset=x-unknown']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(`\ufeff${t}`, 'utf16le'),
      headers: [['content-type', 'application/json; charset=utf-16le']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t, 'utf16le'),
      headers: [['content-type', 'application/json']] as [string, string][],
    }),
    (t: string) => ({
      bytes: utf16be(`\ufeff${t}`),
      headers: [['content-type', 'application/json']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t, 'latin1'),
      headers: [['content-type', 'application/json; charset=latin1']] as [string, string][],
    }),
    (t: string) => ({ bytes: Buffer.from(t), headers: [['content-type', 'text/plain']] as [string, string][] }),
    (t: string) => ({ bytes: Buffer.from(t), headers: [] as [string, string][] }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-type', 'text/plain; charset=utf-16'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: gzipSync(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: brotliCompressSync(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'br'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: deflateSync(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'deflate'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: gzipSync(gzipSync(t)),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip, gzip'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'br'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'identity'],
      ] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'x-garbage'],
      ] as [string, string][],
    }),
    (t: string) => ({ bytes: gzipSync(t), headers: [['content-type', 'application/json']] as [string, string][] }),
  ),
);

/** Whether HTTP allows `value` in a header field: no control character but tab. */
export function legalHeaderValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return false;
  }
  return true;
}

/** A header value: plain, odd but legal (obs-text, spaces), or illegal on the wire. */
export const headerValue: fc.Arbitrary<{ value: string; legal: boolean }> = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,40}$/).map((value) => ({ value, legal: true })) },
  fc
    .constantFrom('', ' ', 'a b', '\t x', '\xff\xfe', 'x'.repeat(8000), 'null', '../../', '%00')
    .map((value) => ({ value, legal: true })),
  fc.constantFrom('a\u0000b', 'a\rb', 'a\nb: c', '\u0001').map((value) => ({ value, legal: false })),
);

/** How a request reaches the proxy: a reverse route, an absolute URI, or plain HTTP inside a CONNECT. */
export type Delivery = 'reverse' | 'forward' | 'connect';

export interface ProviderRequest {
  endpoint: Endpoint;
  delivery: Delivery;
  raw: RawRequest;
  /** `host:port` to CONNECT to first. */
  connect?: string;
  /** The adapter the proxy must route this to (its refusals come in that provider's format), or null. */
  routed: ProviderId | null;
  /** Framing or fields an HTTP parser may refuse before the proxy sees a request. */
  broken: boolean;
  /** The body bytes the proxy reads (a lying length cuts them). */
  readBytes: Buffer;
  /** The client leaves after this long. */
  abortAfterMs?: number;
  /** A short description for failure messages. */
  summary: string;
}

/** Paths that are almost a route: what an exact matcher must not take for one (or must, once normalised). */
const pathTwist: fc.Arbitrary<(path: string) => string> = fc.oneof(
  { weight: 5, arbitrary: fc.constant((p: string) => p) },
  fc.constantFrom(
    (p: string) => `${p}/`,
    (p: string) => p.replace('/', '//'),
    (p: string) => (p.includes('?') ? `${p}&x=1` : `${p}?x=1`),
    (p: string) => p.toUpperCase(),
    (p: string) => p.replace(/\/(?=[^/]*$)/, '%2f'),
    (p: string) => `/v1/files/x${p}`,
    (p: string) => `${p}/x`,
    (p: string) => p.replace('/v1/', '/v1/./'),
    (p: string) => p.replace('/v1/', '/v1/x/../'),
    (p: string) => p.replace('/v1/', '/v1/x/%2e%2e/'),
    (p: string) => `${p};x`,
    (p: string) => `${p}%00`,
    (p: string) => `${p}#frag`,
    (p: string) => p.replace('/', '/\u00e9/'),
    (p: string) => `${p}${'/a'.repeat(2000)}`,
  ),
);

const reverseTwist: fc.Arbitrary<(prefix: string) => string> = fc.oneof(
  { weight: 8, arbitrary: fc.constant((p: string) => p) },
  fc.constantFrom(
    (p: string) => p.toUpperCase(),
    (p: string) => `${p}x`,
    (p: string) => `/${p}`,
    (p: string) => `${p}/..`,
    () => '/azure',
    () => '/compat',
    () => '/openai/../anthropic',
  ),
);

export interface RequestPools {
  /** Execution ids shared between inputs, so some inputs land in an existing envelope. */
  executions: readonly string[];
  boundBudgets: readonly string[];
  unboundBudget: string;
}

/** Headers about governance: every `x-svc-*` field, with good, odd and foreign values. */
function governanceHeaders(pools: RequestPools): fc.Arbitrary<{ fields: [string, string][]; legal: boolean }> {
  const field = fc.oneof(
    fc.tuple(fc.constant('x-svc-execution-id'), fc.oneof(fc.constantFrom(...pools.executions), fc.uuid())),
    fc.tuple(
      fc.constant('x-svc-budget-id'),
      fc.constantFrom(...pools.boundBudgets, pools.unboundBudget, 'no-such-budget', ''),
    ),
    fc.tuple(fc.constant('X-Svc-Budget-Id'), fc.constantFrom(...pools.boundBudgets, pools.unboundBudget)),
    fc.tuple(fc.constant('x-svc-envelope-id'), fc.oneof(fc.uuid(), fc.constantFrom('', 'env-x', 'x'.repeat(300)))),
    fc.tuple(
      fc.constantFrom(
        'x-svc-tenant-id',
        'x-svc-execution-id',
        'x-svc-envelope-id',
        'x-svc-budget-id',
        'x-svc-anything',
        'X-SVC-DEBUG',
      ),
      headerValue.map((h) => h.value),
    ),
  );
  return fc.array(field, { maxLength: 4 }).map((fields) => ({
    fields,
    legal: fields.every(([, v]) => legalHeaderValue(v)),
  }));
}

/** Credentials the agent sends: none, its own key, several, in every provider's header. */
const agentCredentials: fc.Arbitrary<[string, string][]> = fc.array(
  fc.tuple(
    fc.constantFrom('authorization', 'Authorization', 'x-api-key', 'api-key', 'x-goog-api-key'),
    fc.constantFrom('Bearer sk-agent-own-key', 'sk-agent-own-key', '', 'Basic Zm9vOmJhcg=='),
  ),
  { maxLength: 3 },
);

const framing: fc.Arbitrary<RawRequest['framing']> = fc.oneof(
  { weight: 24, arbitrary: fc.constant({ kind: 'length' as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'chunked' as const }) },
  fc.constant({ kind: 'both' as const }),
  fc.constant({ kind: 'none' as const }),
  fc
    .integer({ min: -50, max: 50 })
    .filter((d) => d !== 0)
    .map((delta) => ({ kind: 'lying-length' as const, delta })),
);

/** One request to the proxy for some provider endpoint, broken in zero or more ways. */
export function providerRequests(pools: RequestPools): fc.Arbitrary<ProviderRequest> {
  // Metered endpoints are where governance happens: they get most of the inputs.
  const endpoints = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...ENDPOINTS.filter((e) => e.kind === 'metered')) },
    { weight: 1, arbitrary: fc.constantFrom(...ENDPOINTS.filter((e) => e.kind !== 'metered')) },
  );
  return endpoints.chain((endpoint) =>
    fc
      .record({
        delivery: fc.constantFrom<Delivery>(
          ...(endpoint.reverse !== undefined
            ? (['reverse', 'forward', 'connect'] as const)
            : (['forward', 'connect'] as const)),
        ),
        model: modelOf(endpoint.provider),
        text: fc.oneof({ weight: 8, arbitrary: oddText }, oddValue),
        maxTokens: fc.oneof(
          { weight: 6, arbitrary: fc.integer({ min: 1, max: 40 }) },
          fc.constant(undefined),
          oddValue,
        ),
        stream: fc.oneof({ weight: 10, arbitrary: fc.boolean() }, oddValue),
        toolName: fc.constantFrom('search', DENIED_TOOL),
        mutations: fc.oneof(
          { weight: 8, arbitrary: fc.constant([]) },
          fc.array(fc.record({ at: fc.nat(), remove: fc.boolean(), value: oddValue }), { minLength: 1, maxLength: 3 }),
        ),
        damage: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, textDamage),
        strange: sometimes(strangeBody, 16, null),
        oversize: fc.integer({ min: 0, max: 99 }).map((n) => n < 2),
        encode: encoding,
        pathTwist,
        reverseTwist,
        method: fc.oneof(
          { weight: 24, arbitrary: fc.constant(endpoint.method) },
          fc.constantFrom('GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'post'),
        ),
        credentials: agentCredentials,
        governance: fc.oneof(
          { weight: 2, arbitrary: fc.constant({ fields: [] as [string, string][], legal: true }) },
          governanceHeaders(pools),
        ),
        extra: fc.oneof(
          { weight: 3, arbitrary: fc.constant([] as [string, { value: string; legal: boolean }][]) },
          fc.array(
            fc.tuple(
              fc.constantFrom(
                'accept-encoding',
                'accept',
                'expect',
                'x-forwarded-for',
                'upgrade',
                'connection',
                'te',
                'x-stainless-retry-count',
                'cookie',
              ),
              headerValue,
            ),
            { minLength: 1, maxLength: 3 },
          ),
        ),
        framing,
        abortAfterMs: sometimes(fc.integer({ min: 1, max: 150 }), 25, undefined),
        close: fc.boolean(),
      })
      .map((g): ProviderRequest => {
        const modelText = typeof g.model === 'string' ? g.model : 'gpt-4o-mini';
        const stream = g.stream === true;
        let text: string;
        if (g.strange !== null) text = g.strange;
        else {
          const value = mutate(
            endpoint.body({
              model: g.model,
              text: g.text,
              maxTokens: g.maxTokens,
              stream: g.stream,
              toolName: g.toolName,
            }),
            g.mutations,
          );
          text = JSON.stringify(value) ?? '';
          if (g.damage !== null) text = g.damage(text);
        }
        if (g.oversize)
          text = JSON.stringify({ model: modelText, messages: [{ role: 'user', content: 'x'.repeat(300_000) }] });
        const encoded =
          endpoint.method === 'GET' && g.method === 'GET' ? { bytes: Buffer.alloc(0), headers: [] } : g.encode(text);
        const path = g.pathTwist(endpoint.path(modelText, stream));
        const hostName = endpoint.host.split(':')[0]!;
        const port = endpoint.host.includes(':') ? endpoint.host.split(':')[1]! : '';
        let target: string;
        let hostHeader: string;
        let routed: ProviderId | null = endpoint.provider;
        let connect: string | undefined;
        if (g.delivery === 'reverse') {
          const prefix = g.reverseTwist(endpoint.reverse!);
          target = `${prefix}${path}`;
          hostHeader = '127.0.0.1';
          if (prefix === '/openai/../anthropic') routed = 'openai';
          else if (prefix !== endpoint.reverse && prefix !== `${endpoint.reverse}/..`) routed = null;
        } else if (g.delivery === 'forward') {
          target = `http://${endpoint.host}${path}`;
          hostHeader = endpoint.host;
        } else {
          connect = `${hostName}:${port === '' ? 443 : port}`;
          target = path;
          hostHeader = endpoint.host;
        }
        // A fragment or NUL never survives as a request target; the parser decides.
        const oddTarget = /[#\u0080-\uffff]/.test(target);
        const headers: [string, string][] = [['host', hostHeader], ...encoded.headers];
        headers.push(...g.credentials);
        headers.push(...g.governance.fields);
        for (const [name, h] of g.extra) headers.push([name, h.value]);
        // A HEAD answer has no body to end it: the connection closing does.
        if (g.close || g.method === 'HEAD') headers.push(['connection', 'close']);
        const extraLegal = g.extra.every(([, h]) => h.legal);
        const bodyless = encoded.bytes.length === 0;
        const framingUsed: RawRequest['framing'] =
          bodyless && g.framing.kind !== 'both' ? { kind: 'length' } : g.framing;
        // Node refuses a request head over 16 KiB before any handler sees it.
        const headBytes = target.length + headers.reduce((n, [name, value]) => n + name.length + value.length + 4, 0);
        const oversizedHead = headBytes > 16 * 1024 - 256;
        const broken =
          oddTarget ||
          oversizedHead ||
          !g.governance.legal ||
          !extraLegal ||
          framingUsed.kind === 'both' ||
          framingUsed.kind === 'lying-length' ||
          (framingUsed.kind === 'none' && !bodyless) ||
          g.extra.some(([name]) => name === 'expect' || name === 'te' || name === 'upgrade' || name === 'connection') ||
          g.method === 'HEAD' ||
          g.method === 'post';
        const declared =
          framingUsed.kind === 'lying-length'
            ? Math.max(0, encoded.bytes.length + framingUsed.delta)
            : encoded.bytes.length;
        const readBytes = framingUsed.kind === 'none' ? Buffer.alloc(0) : encoded.bytes.subarray(0, declared);
        // A client that declared more than it sent waits for an answer that cannot come; it leaves.
        const waits = framingUsed.kind === 'lying-length' && framingUsed.delta > 0;
        const abortAfterMs = g.abortAfterMs ?? (waits ? 300 : undefined);
        return {
          endpoint,
          delivery: g.delivery,
          raw: { method: g.method, target, headers, body: encoded.bytes, framing: framingUsed },
          ...(connect !== undefined ? { connect } : {}),
          routed,
          broken,
          readBytes,
          ...(abortAfterMs !== undefined ? { abortAfterMs } : {}),
          summary: `${endpoint.name} via ${g.delivery} ${g.method} ${target.slice(0, 200)} framing=${JSON.stringify(framingUsed)} headers=${JSON.stringify(headers.map(([n, v]) => [n, v.slice(0, 80)]))} body(${encoded.bytes.length})=${JSON.stringify(text.slice(0, 300))}`,
        };
      }),
  );
}
