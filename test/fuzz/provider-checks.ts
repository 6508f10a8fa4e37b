import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { ERROR_CATALOGUE, ErrorBodySchema, isSvcCode } from '../../core/errors/index.ts';
import type { ProviderId } from '../../proxy/providers/adapter.ts';
import { duplicateKey } from '../../proxy/governance/strict-json.ts';
import type { Reached } from './fuzz-upstream.ts';
import type { ErrorFamily } from './provider-requests.ts';
import { contentDecoded, jsonOf, type RawAnswer } from './raw-http.ts';

/** The keys the proxy holds and sets on every upstream request, and the header each goes in. */
export const PROVIDER_KEYS: Record<ProviderId, { env: string; header: string; value: string }> = {
  openai: { env: 'SVC_PROVIDER_KEY_OPENAI', header: 'authorization', value: 'Bearer sk-fuzz-proxy-openai' },
  anthropic: { env: 'SVC_PROVIDER_KEY_ANTHROPIC', header: 'x-api-key', value: 'sk-ant-fuzz-proxy' },
  gemini: { env: 'SVC_PROVIDER_KEY_GEMINI', header: 'x-goog-api-key', value: 'goog-fuzz-proxy' },
  'azure-openai': { env: 'SVC_PROVIDER_KEY_AZURE_OPENAI', header: 'api-key', value: 'azure-fuzz-proxy' },
  'openai-compatible': {
    env: 'SVC_PROVIDER_KEY_OPENAI_COMPATIBLE',
    header: 'authorization',
    value: 'Bearer sk-fuzz-proxy-compat',
  },
};

/** The configuration values of the keys (the header value without a scheme). */
export function providerKeyEnv(): Record<string, string> {
  return Object.fromEntries(Object.values(PROVIDER_KEYS).map(({ env, value }) => [env, value.replace(/^Bearer /, '')]));
}

const FAMILY: Record<ProviderId, ErrorFamily> = {
  openai: 'openai',
  'azure-openai': 'openai',
  'openai-compatible': 'openai',
  anthropic: 'anthropic',
  gemini: 'gemini',
};

export function familyOf(provider: ProviderId): ErrorFamily {
  return FAMILY[provider];
}

const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'];

/** The path as the proxy matches routes: no query, repeated slashes collapsed, one trailing slash dropped. */
function routePath(path: string): string {
  const bare = path.split('?')[0]!.replace(/\/{2,}/g, '/');
  return bare.length > 1 && bare.endsWith('/') ? bare.slice(0, -1) : bare;
}

/** The route path as a lenient server may read it: percent-decoded where it can be. */
function lenientRoutePath(path: string): string {
  try {
    return routePath(decodeURIComponent(path));
  } catch {
    return routePath(path);
  }
}

const SEGMENT = '[^/:]+';
const OPENAI_OPS = '(chat/completions|responses|embeddings|completions)';
/** Metered routes per adapter (docs/providers.md), as patterns on the route path. */
const METERED: Record<ProviderId, RegExp> = {
  openai: new RegExp(`^/v1/${OPENAI_OPS}$`),
  'openai-compatible': new RegExp(`^/v1/${OPENAI_OPS}$`),
  'azure-openai': new RegExp(
    `^(/openai/deployments/${SEGMENT}/(chat/completions|completions|embeddings)|/openai/responses|/openai/v1/${OPENAI_OPS})$`,
  ),
  anthropic: /^\/v1\/messages$/,
  gemini: new RegExp(
    `^/(v1beta|v1)/models/${SEGMENT}:(generateContent|streamGenerateContent|embedContent|batchEmbedContents)$`,
  ),
};
const FREE: Record<ProviderId, RegExp> = {
  openai: /^\/v1\/(responses\/input_tokens|moderations)$/,
  'openai-compatible': /^\/v1\/(responses\/input_tokens|moderations)$/,
  'azure-openai': /^\/openai\/v1\/(responses\/input_tokens|moderations)$/,
  anthropic: /^\/v1\/messages\/count_tokens$/,
  gemini: new RegExp(`^/(v1beta|v1)/models/${SEGMENT}:countTokens$`),
};

/** Routes that generate after the request returns: refused, so never reaching the upstream (in any spelling). */
const DENIED: Record<ProviderId, RegExp> = {
  openai: /^\/v1\/batches$/i,
  'openai-compatible': /^\/v1\/batches$/i,
  'azure-openai': /^\/openai(\/v1)?\/batches$/i,
  anthropic: /^\/v1\/messages\/batches$/i,
  gemini: new RegExp(`^/(v1beta|v1)/models/${SEGMENT}:batchGenerateContent$`, 'i'),
};

/** How the proxy must have treated a request that reached the upstream. */
export type Treatment = 'metered' | 'unclassified' | 'free';

/** The client's headers as sent to the proxy, name and value. */
type SentHeaders = readonly (readonly [string, string])[];

/**
 * `sent` is what the client sent: the proxy drops hop-by-hop fields such as `Upgrade` before the
 * upstream, so a read that asked for an upgrade (a realtime websocket, governed) reaches it bare.
 */
export function treatmentOf(provider: ProviderId, reached: Reached, sent: SentHeaders): Treatment {
  const path = routePath(reached.path);
  const plainRead =
    (reached.method === 'GET' || reached.method === 'HEAD') &&
    reached.bodyBytes === 0 &&
    !sent.some(([name]) => name.toLowerCase() === 'upgrade');
  if (reached.method === 'POST' && METERED[provider].test(path)) return 'metered';
  if (reached.method === 'POST' && FREE[provider].test(path)) return 'free';
  return plainRead ? 'free' : 'unclassified';
}

/** Whether the proxy must have charged this request: it was governed and the upstream did not refuse it. */
export function billable(provider: ProviderId, reached: Reached, sent: SentHeaders): boolean {
  if (treatmentOf(provider, reached, sent) === 'free') return false;
  return reached.answered === 'reset' || reached.answered < 400;
}

/** The JSON text of a body without `stream_options` (which the proxy may add), or undefined when too deep to write. */
function withoutStreamOptions(value: unknown): string | undefined {
  const rest =
    typeof value === 'object' && value !== null && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).filter(([k]) => k !== 'stream_options'))
      : value;
  try {
    return JSON.stringify(rest);
  } catch {
    return undefined;
  }
}

function charsetOf(contentType: string | undefined): string | undefined {
  return /;\s*charset\s*=\s*"?([^";]+)/i
    .exec(contentType ?? '')?.[1]
    ?.trim()
    .toLowerCase();
}

const BOMS: [number[], string][] = [
  [[0xef, 0xbb, 0xbf], 'utf-8'],
  [[0xff, 0xfe], 'utf-16le'],
  [[0xfe, 0xff], 'utf-16be'],
];

/**
 * The JSON a server makes of a body sent with these header fields: its content codings undone,
 * its text decoded by byte order mark, else charset, else UTF-8; undefined when it cannot.
 */
export function asServerReads(bytes: Buffer, headers: readonly (readonly [string, string])[]): unknown {
  const field = (name: string) => headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
  const codings = field('content-encoding')
    .join(',')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  try {
    let out = bytes;
    for (const coding of codings.reverse()) {
      if (coding === 'gzip' || coding === 'x-gzip') out = gunzipSync(out);
      else if (coding === 'deflate') out = inflateSync(out);
      else if (coding === 'br') out = brotliDecompressSync(out);
      else return undefined;
    }
    const bom = BOMS.find(([marks]) => marks.every((b, i) => out[i] === b))?.[1];
    const text = new TextDecoder(bom ?? charsetOf(field('content-type')[0]) ?? 'utf-8', { fatal: true }).decode(out);
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * What a request that reached the upstream shows of ungoverned traffic: the agent's credential
 * instead of the proxy's, a governance header, a body the upstream would read differently from
 * what the proxy governed (another coding or charset, a repeated key, other JSON, other bytes).
 */
export function ungoverned(
  provider: ProviderId,
  reached: Reached,
  readBytes: Buffer,
  sentHeaders: readonly (readonly [string, string])[],
): string[] {
  const problems: string[] = [];
  const key = PROVIDER_KEYS[provider];
  for (const name of CREDENTIAL_HEADERS) {
    const value = reached.headers[name];
    if (name === key.header) {
      if (value !== key.value) problems.push(`${name} is ${JSON.stringify(value)}, not the proxy's key`);
    } else if (value !== undefined) problems.push(`the agent's ${name} reached the upstream`);
  }
  if (provider === 'gemini' && /[?&]key=/.test(reached.path))
    problems.push('a key= query credential reached the upstream');
  for (const name of Object.keys(reached.headers)) {
    if (name.toLowerCase().startsWith('x-svc-')) problems.push(`governance header ${name} reached the upstream`);
  }
  if (reached.method === 'POST' && DENIED[provider].test(lenientRoutePath(reached.path)))
    problems.push('a route that generates after the request returns reached the upstream');
  const treatment = treatmentOf(provider, reached, sentHeaders);
  if (treatment === 'free') return problems;
  const coding = String(reached.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (coding !== 'identity') problems.push(`content-encoding ${coding} reached the upstream on a governed call`);
  // An unclassified body is counted as bytes, not read as text: only its coding changes what it holds.
  if (treatment === 'unclassified') return problems;
  const charset = charsetOf(reached.headers['content-type']);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
    problems.push(`charset ${charset} reached the upstream: it reads the bytes otherwise than the proxy did`);
  const text = reached.body.toString('utf8');
  let sent: unknown;
  try {
    sent = JSON.parse(text);
  } catch {
    problems.push(`the upstream got a body that is not JSON: ${JSON.stringify(text.slice(0, 200))}`);
    return problems;
  }
  const twice = duplicateKey(text);
  if (twice !== undefined) problems.push(`the upstream got key "${twice}" twice: which one it reads is its choice`);
  // Bytes as received are what the proxy parsed; a rewritten body must say what the agent's body
  // says to a server reading its codings and charset, but for stream_options.
  if (!reached.body.equals(readBytes)) {
    const governed = withoutStreamOptions(asServerReads(readBytes, sentHeaders));
    if (governed === undefined || governed !== withoutStreamOptions(sent))
      problems.push(`the upstream got other JSON than the proxy parsed: ${text.slice(0, 200)}`);
  }
  return problems;
}

/** The SVC code of a refusal, and what is wrong with the way it is written. */
export function refusalProblems(answer: RawAnswer, family: ErrorFamily | null): string[] {
  const json = jsonOf(answer.body) as Record<string, any> | undefined;
  const status = answer.status ?? 0;
  const generic = ErrorBodySchema.safeParse(json);
  let code: string | undefined;
  if (family === null) {
    if (!generic.success) return [`refusal without the structured error body: ${answer.body.toString('utf8', 0, 300)}`];
    code = generic.data.error.code;
  } else {
    const error = json?.error as Record<string, any> | undefined;
    const message = typeof error?.message === 'string' ? error.message : '';
    if (family === 'openai') code = typeof error?.code === 'string' ? error.code : undefined;
    if (family === 'anthropic')
      code = json?.type === 'error' && typeof error?.code === 'string' ? error.code : undefined;
    if (family === 'gemini')
      code = Array.isArray(error?.details)
        ? error.details.find((d: any) => typeof d?.reason === 'string')?.reason
        : undefined;
    if (code === undefined)
      return [`refusal not in the ${family} error format with an SVC code: ${answer.body.toString('utf8', 0, 300)}`];
    if (!message.startsWith(`${code}:`)) return [`refusal message does not start with its code ${code}: ${message}`];
    if (answer.headers['x-svc-error-code']?.[0] !== code) return [`x-svc-error-code is not ${code}`];
  }
  if (!isSvcCode(code)) return [`refusal with ${code}, not a catalogue code`];
  if (ERROR_CATALOGUE[code].http !== status)
    return [`${code} answered with ${status}, the catalogue says ${ERROR_CATALOGUE[code].http}`];
  return [];
}

/** The SVC code a refusal carries in any of the formats, for tallies and expected-code checks. */
export function refusalCode(answer: RawAnswer): string | undefined {
  const json = jsonOf(answer.body) as Record<string, any> | undefined;
  const error = json?.error as Record<string, any> | undefined;
  const header = answer.headers['x-svc-error-code']?.[0];
  if (header !== undefined) return header;
  return typeof error?.code === 'string' ? error.code : undefined;
}

/** Whether the answer the agent can read (content codings undone, as its HTTP client does) offers a call to `tool`. */
export function offersTool(answer: RawAnswer, tool: string): boolean {
  const decoded = contentDecoded(answer) ?? answer.body;
  return new RegExp(`"name"\\s*:\\s*"${tool}"`).test(decoded.toString('utf8'));
}
