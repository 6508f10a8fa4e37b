import type { Operation } from './adapter.ts';
import { pathOnly } from './json-access.ts';

/**
 * What a stored answer read back holds: one Responses response, one chat completion, a list of
 * chat completions, a list of conversation items, one item, or a message batch's results (JSON
 * Lines, one request's result a line).
 */
export type StoredShape = 'response' | 'completion' | 'completions' | 'items' | 'item' | 'batch_results';

/** Stored answers served as JSON Lines rather than one JSON document. */
export const JSON_LINES_SHAPES: ReadonlySet<StoredShape> = new Set(['batch_results']);

/** Where a request stands on a provider's surface. */
export type RouteMatch =
  /** A call the proxy governs and meters as `op`. */
  | { kind: 'metered'; op: Operation }
  /** A route that generates nothing billable (token counting): relayed free. */
  | { kind: 'free' }
  /** A `GET` of answers the provider stored: the model's output again, its tool calls judged. */
  | { kind: 'stored'; shape: StoredShape }
  /** A route that opens a way to the provider around the proxy: always refused, for `reason`. */
  | { kind: 'denied'; reason: string }
  /** No route of this provider: the unclassified-path rule applies (metered by estimate, or refused). */
  | null;

/**
 * One exact route: literal segments, and `{name}` for one segment's variable part (no `/` or
 * `:`, so `{model}:generateContent` takes the model id alone). A call or a free route is a POST;
 * a stored answer's is a GET.
 */
export type RoutePattern =
  { path: string; op: Operation | 'free' } | { path: string; stored: StoredShape } | { path: string; denied: string };

export interface RouteTable {
  readonly patterns: readonly RoutePattern[];
  match(method: string, path: string): RouteMatch;
}

/**
 * The form a path is matched in: no query, no repeated or trailing slash, so
 * `/v1/chat/completions/?x=1` is the chat route. Nothing else is rewritten: an encoded
 * slash or another spelling is not a route and falls under the unclassified-path rule,
 * which never lets it through free.
 */
export function normalizeRoutePath(path: string): string {
  const collapsed = pathOnly(path).replace(/\/{2,}/g, '/');
  return collapsed.length > 1 && collapsed.endsWith('/') ? collapsed.slice(0, -1) : collapsed;
}

/**
 * A path as a lenient server might route it: percent-decoded and in lower case. A stored answer's
 * read and a denied route are matched in this form too, so a spelling the provider may route to
 * one of them (`/v1/responses%2Fresp_1`, `/V1/Realtime/Client_Secrets`) is governed like it,
 * never passed as a plain read or metered by estimate.
 */
function lenientPath(path: string): string {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // Not valid percent-encoding: matched as it is.
  }
  return normalizeRoutePath(decoded.toLowerCase());
}

const REGEX_SPECIAL = /[.*+?^${}()|[\]\\]/g;

function compile(pattern: string): RegExp {
  const source = pattern
    .split(/(\{[a-z]+\})/)
    .map((part) => (/^\{[a-z]+\}$/.test(part) ? '[^/:]+' : part.replace(REGEX_SPECIAL, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`);
}

interface MethodRoutes {
  exact: Map<string, RouteMatch>;
  templated: { regex: RegExp; match: RouteMatch }[];
}

function methodRoutes(): Record<'POST' | 'GET', MethodRoutes> {
  return { POST: { exact: new Map(), templated: [] }, GET: { exact: new Map(), templated: [] } };
}

function add(routes: MethodRoutes, path: string, match: RouteMatch): void {
  if (path.includes('{')) routes.templated.push({ regex: compile(path), match });
  else routes.exact.set(path, match);
}

function find(routes: MethodRoutes, path: string): RouteMatch | undefined {
  return routes.exact.get(path) ?? routes.templated.find((t) => t.regex.test(path))?.match;
}

export function compileRoutes(patterns: readonly RoutePattern[]): RouteTable {
  const strict = methodRoutes();
  // Only a route that governs more than the unclassified rule is taken in a lenient spelling, and
  // matched as that spelling is written: in lower case (`:batchGenerateContent` as well).
  const lenient = methodRoutes();
  for (const pattern of patterns) {
    const [method, match]: ['POST' | 'GET', RouteMatch] =
      'stored' in pattern
        ? ['GET', { kind: 'stored', shape: pattern.stored }]
        : 'denied' in pattern
          ? ['POST', { kind: 'denied', reason: pattern.denied }]
          : ['POST', pattern.op === 'free' ? { kind: 'free' } : { kind: 'metered', op: pattern.op }];
    add(strict[method], pattern.path, match);
    if (match?.kind === 'stored' || match?.kind === 'denied') add(lenient[method], pattern.path.toLowerCase(), match);
  }
  return {
    patterns,
    match(method, path) {
      const upper = method.toUpperCase();
      if (upper !== 'POST' && upper !== 'GET') return null;
      const p = normalizeRoutePath(path);
      return find(strict[upper], p) ?? find(lenient[upper], lenientPath(p)) ?? null;
    },
  };
}

/** The metered operation of a route, or null: what `ProviderAdapter.classify` answers. */
export function meteredOperation(match: RouteMatch): Operation | null {
  return match?.kind === 'metered' ? match.op : null;
}

/**
 * A base path as configured (`/v1`, `/api/v1/`, `/`): leading slash, no trailing one, the root
 * as the empty string.
 */
export function normalizeBasePath(base: string): string {
  const trimmed = base.trim().replace(/\/+$/, '');
  return trimmed === '' ? '' : trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

/**
 * The OpenAI surface under each base path (`/v1` at OpenAI; configurable for compatible
 * servers). Blank entries are ignored; the root is written `/`.
 */
export function openAiRoutes(basePaths: readonly string[]): RoutePattern[] {
  const bases = basePaths.filter((b) => b.trim() !== '').map(normalizeBasePath);
  return bases.flatMap((base) => [
    { path: `${base}/chat/completions`, op: 'chat' as const },
    { path: `${base}/responses`, op: 'responses' as const },
    { path: `${base}/embeddings`, op: 'embeddings' as const },
    { path: `${base}/completions`, op: 'completions' as const },
    { path: `${base}/responses/input_tokens`, op: 'free' as const },
    // OpenAI does not bill moderation.
    { path: `${base}/moderations`, op: 'free' as const },
    ...storedRoutes(base),
    ...deniedRoutes(base),
  ]);
}

const MINTS_CREDENTIAL =
  'it mints a credential for the provider that reaches it without the proxy, so nothing the agent did with it would be governed';
const OPENS_SESSION =
  "it opens a realtime session whose audio and text flow between the agent and the provider, out of the proxy's sight";
const WORKS_LATER =
  "it starts work the provider runs and bills after the request returns (a batch, an evaluation run, a fine-tuning job, a video), out of the proxy's sight: its cost could not be metered nor its output governed";
const STORES_LATER =
  'it stores context the provider bills by the hour for as long as the cache lives, after the request returns: its cost could not be metered';

/**
 * The OpenAI routes that would take the agent around the proxy: ephemeral keys, realtime
 * sessions, and work that generates (and bills) after the request returns.
 */
function deniedRoutes(base: string): RoutePattern[] {
  return [
    { path: `${base}/batches`, denied: WORKS_LATER },
    { path: `${base}/evals/{id}/runs`, denied: WORKS_LATER },
    { path: `${base}/fine_tuning/jobs`, denied: WORKS_LATER },
    { path: `${base}/videos`, denied: WORKS_LATER },
    { path: `${base}/videos/{id}/remix`, denied: WORKS_LATER },
    { path: `${base}/realtime/client_secrets`, denied: MINTS_CREDENTIAL },
    { path: `${base}/realtime/sessions`, denied: MINTS_CREDENTIAL },
    { path: `${base}/realtime/transcription_sessions`, denied: MINTS_CREDENTIAL },
    { path: `${base}/realtime`, denied: OPENS_SESSION },
    { path: `${base}/realtime/calls`, denied: OPENS_SESSION },
    { path: `${base}/realtime/calls/{id}/accept`, denied: OPENS_SESSION },
  ];
}

/** Where OpenAI serves the answers it stored (`store`, conversations): read back with a GET. */
function storedRoutes(base: string): RoutePattern[] {
  return [
    { path: `${base}/responses/{id}`, stored: 'response' },
    { path: `${base}/chat/completions`, stored: 'completions' },
    { path: `${base}/chat/completions/{id}`, stored: 'completion' },
    { path: `${base}/conversations/{id}/items`, stored: 'items' },
    { path: `${base}/conversations/{id}/items/{item}`, stored: 'item' },
  ];
}

/** Azure: deployment routes (`?api-version=` is a query, not part of the route), and the v1 API. */
export const AZURE_OPENAI_ROUTES: readonly RoutePattern[] = [
  { path: '/openai/deployments/{deployment}/chat/completions', op: 'chat' },
  { path: '/openai/deployments/{deployment}/completions', op: 'completions' },
  { path: '/openai/deployments/{deployment}/embeddings', op: 'embeddings' },
  { path: '/openai/responses', op: 'responses' },
  { path: '/openai/responses/{id}', stored: 'response' },
  { path: '/openai/realtimeapi/sessions', denied: MINTS_CREDENTIAL },
  { path: '/openai/batches', denied: WORKS_LATER },
  { path: '/openai/fine_tuning/jobs', denied: WORKS_LATER },
  ...openAiRoutes(['/openai/v1']),
];

export const ANTHROPIC_ROUTES: readonly RoutePattern[] = [
  { path: '/v1/messages', op: 'messages' },
  { path: '/v1/messages/count_tokens', op: 'free' },
  { path: '/v1/messages/batches', denied: WORKS_LATER },
  // A message batch's answers, generated out of the proxy's sight and read back here.
  { path: '/v1/messages/batches/{id}/results', stored: 'batch_results' },
];

const GEMINI_VERBS = {
  generateContent: 'generate',
  streamGenerateContent: 'stream_generate',
  embedContent: 'embed',
  batchEmbedContents: 'batch_embed',
  countTokens: 'free',
} as const satisfies Record<string, Operation | 'free'>;

/** A tuned model generates as its base model does; it has no embedding methods. */
const TUNED_MODEL_VERBS = ['generateContent', 'streamGenerateContent', 'countTokens'] as const;

/** Every API version Google serves generation under, the preview `v1alpha` included. */
const GEMINI_VERSIONS = ['v1', 'v1beta', 'v1alpha'];

export const GEMINI_ROUTES: readonly RoutePattern[] = [
  ...GEMINI_VERSIONS.flatMap((version) => [
    ...Object.entries(GEMINI_VERBS).map(([verb, op]) => ({ path: `/${version}/models/{model}:${verb}`, op })),
    ...TUNED_MODEL_VERBS.map((verb) => ({ path: `/${version}/tunedModels/{model}:${verb}`, op: GEMINI_VERBS[verb] })),
  ]),
  // Ephemeral tokens, for the Live API from a client the proxy does not stand in front of.
  ...GEMINI_VERSIONS.map((version) => ({ path: `/${version}/auth_tokens`, denied: MINTS_CREDENTIAL })),
  // Batches, video generation (Veo) and tuning, run and billed after the request returns.
  ...GEMINI_VERSIONS.flatMap((version) => [
    ...['batchGenerateContent', 'asyncBatchEmbedContent', 'predictLongRunning'].map((verb) => ({
      path: `/${version}/models/{model}:${verb}`,
      denied: WORKS_LATER,
    })),
    { path: `/${version}/tunedModels`, denied: WORKS_LATER },
    // A context cache, billed per token and hour of its time to live.
    { path: `/${version}/cachedContents`, denied: STORES_LATER },
  ]),
];

/** A path segment as the provider reads it: percent-decoded (`gemini%2D2.5-pro` is `gemini-2.5-pro`). */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** A model as Gemini names it in a path: `models/{id}` is `{id}`, a tuned model `tunedModels/{id}`. */
function geminiModel(collection: string, id: string): string {
  return collection.toLowerCase() === 'models' ? id : `tunedModels/${id}`;
}

const GEMINI_MODEL = /^\/v1(?:beta|alpha)?\/(models|tunedModels)\/([^/:]+):[A-Za-z]+$/;
const GEMINI_MODEL_ANYWHERE = /\/(models|tunedmodels)\/([^/:]+)(?::|\/|$)/;

/**
 * The model a Gemini route names: `/v1beta/models/gemini-2.0-flash:generateContent` →
 * `gemini-2.0-flash`, `/v1beta/tunedModels/mine:generateContent` → `tunedModels/mine`.
 */
export function geminiModelFromPath(path: string): string | undefined {
  const named = GEMINI_MODEL.exec(normalizeRoutePath(path));
  if (named === null) return undefined;
  return geminiModel(named[1]!, decodedSegment(named[2]!));
}

/**
 * The model any path on Google's host names, in the spelling a lenient server may route
 * (`/V1BETA/Models/Gemini-2.5-Pro:GenerateContent`): what an unclassified call is judged as.
 */
export function geminiModelNamedIn(path: string): string | undefined {
  const named = GEMINI_MODEL_ANYWHERE.exec(lenientPath(normalizeRoutePath(path)));
  return named === null ? undefined : geminiModel(named[1]!, named[2]!);
}

const AZURE_DEPLOYMENT = /^\/openai\/deployments\/([^/]+)\//;
const AZURE_DEPLOYMENT_ANYWHERE = /\/deployments\/([^/]+)/;

/**
 * Azure serves the deployment a URL names, whatever model a body claims; deployments are usually
 * named after their model.
 */
export function azureDeploymentFromPath(path: string): string | undefined {
  const name = AZURE_DEPLOYMENT.exec(normalizeRoutePath(path))?.[1];
  return name === undefined ? undefined : decodedSegment(name);
}

/** The deployment any path on an Azure host names, in the spelling a lenient server may route. */
export function azureDeploymentNamedIn(path: string): string | undefined {
  return AZURE_DEPLOYMENT_ANYWHERE.exec(lenientPath(normalizeRoutePath(path)))?.[1];
}
