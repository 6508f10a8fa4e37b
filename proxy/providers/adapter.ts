import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import type { SvcCode } from '../../core/errors/index.ts';
import {
  HostedUsesSchema,
  ServiceTierSchema,
  TokenUsageSchema,
  type HostedTool,
  type HostedUses,
  type ServiceTier,
  type TokenUsage,
} from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { RouteMatch, StoredShape } from './routes.ts';

export const ProviderIdSchema = z.enum(['openai', 'anthropic', 'gemini', 'azure-openai', 'openai-compatible']);
export type ProviderId = z.infer<typeof ProviderIdSchema>;

export const OperationSchema = z.enum([
  'chat',
  'responses',
  'embeddings',
  'completions',
  'messages',
  'generate',
  'stream_generate',
  'embed',
  'batch_embed',
]);
export type Operation = z.infer<typeof OperationSchema>;

/** A tool call the model asked for: its name and its arguments as the model wrote them (JSON text). */
export const ToolCallSchema = z.object({ name: z.string(), arguments: z.string() });
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** What the governance pipeline needs to know about a call before it is sent. */
export const ParsedRequestSchema = z.object({
  model: z.string(),
  stream: z.boolean(),
  /** Prompt tokens counted with tiktoken (an approximation for non-OpenAI models). */
  estimatedInputTokens: z.number().int().nonnegative(),
  /** The most the answer can cost: the request's own limit, else the model's default. */
  maxOutputTokens: z.number().int().nonnegative(),
  /** Names of the tools the request offers the model. */
  declaredTools: z.array(z.string()),
  /**
   * The declared tools the provider defines rather than the agent: those it runs itself (web
   * search, code execution, a remote MCP server, named `mcp`, with its URL as arguments) and
   * built-ins the agent runs (a shell, the computer). Each is judged as `tool:<name>` before the
   * call goes upstream: a call of the provider's own shows only once the provider has made it.
   */
  builtinTools: z.array(ToolCallSchema),
  /**
   * Where the request hands the provider a remote MCP server whose tools it does not restrict by
   * name in a form read here (`tools[2].allowed_tools`): the provider may call any tool of it
   * before the answer shows the call, so a ruleset that judges tools by name refuses the request.
   */
  unlistedMcpServers: z.array(z.string()).optional(),
  /**
   * The most uses of tools the provider bills per use (web and file search, code containers,
   * grounding) the request allows: reserved with its tokens, so the fees count before the call.
   */
  hostedUses: HostedUsesSchema.optional(),
  /**
   * The request asks the provider to cache parts of its prompt (Anthropic's `cache_control`), kept
   * the short time or the long: its worst case bills the whole prompt as written to the cache so.
   */
  promptCaching: z.enum(['short', 'long']).optional(),
  /** The tier the request asks to be served at, when it asks for priority; else standard. */
  serviceTier: ServiceTierSchema.optional(),
});
export type ParsedRequest = z.infer<typeof ParsedRequestSchema>;

/**
 * How many uses of a hosted tool a request is reserved for when it sets no limit of its own: the
 * providers set none, so a call may use more, and is charged each use its answer reports.
 */
export const UNLIMITED_HOSTED_USES = 10;

/** Adds `uses` of `tool` to the request's hosted-tool bound. */
export function allowHostedUses(bound: HostedUses, tool: HostedTool, uses: number | null | undefined): void {
  bound[tool] = (bound[tool] ?? 0) + (uses ?? UNLIMITED_HOSTED_USES);
}

/** The request's hosted-tool bound, left out when it declares no such tool. */
export function hostedUsesOf(bound: HostedUses): Pick<ParsedRequest, 'hostedUses'> {
  return Object.keys(bound).length > 0 ? { hostedUses: bound } : {};
}

/** The request's MCP servers not restricted by name, left out when there are none. */
export function unlistedOf(fields: string[]): Pick<ParsedRequest, 'unlistedMcpServers'> {
  return fields.length > 0 ? { unlistedMcpServers: fields } : {};
}

/** The tools of a request that declares none (embeddings, legacy completions). */
export function noTools(): Pick<ParsedRequest, 'declaredTools' | 'builtinTools'> {
  return { declaredTools: [], builtinTools: [] };
}

export const UsageSourceSchema = z.enum(['provider', 'estimated']);
export type UsageSource = z.infer<typeof UsageSourceSchema>;

/** A tool call in a stream: its arguments arrive in pieces; `complete` once its block or the answer ended. */
export interface StreamedToolCall extends ToolCall {
  complete: boolean;
}

export const ResponseReadingSchema = z.object({
  usage: TokenUsageSchema,
  /** `estimated` when the provider reported no usage and tiktoken counted the answer. */
  usageSource: UsageSourceSchema,
  /** Tool (function) calls the model asked for, with their arguments. */
  toolCalls: z.array(ToolCallSchema),
  model: z.string(),
  /** The tier the answer says it was served at, when it says. */
  serviceTier: ServiceTierSchema.optional(),
});
export type ResponseReading = z.infer<typeof ResponseReadingSchema>;

export interface PreparedRequest {
  /** The body to send upstream; the same object when nothing changed. */
  body: unknown;
  modified: boolean;
  /** The proxy asked for stream usage the client did not: the stream meter hides that chunk. */
  hideStreamUsage: boolean;
  /**
   * When the change is only these top-level fields added, none of them in the body before: the
   * received text with them appended says the same, without the whole body written again.
   */
  added?: Record<string, unknown>;
}

/**
 * Where a stream's metering stands. A meter hands out one object, updated in place at each step:
 * copy what must outlive the next step.
 */
export interface StreamProgress {
  /**
   * Running totals: provider-reported where known, else an upper bound of the output so far (its
   * UTF-8 bytes, with what `exact` already counted); exact in `end` and `exact`.
   */
  usage: TokenUsage;
  usageSource: UsageSource;
  /**
   * Tool calls seen so far (a live list; copy it to keep a snapshot). A call is judged once it
   * is `complete`, before the event that completed it is forwarded.
   */
  toolCalls: readonly StreamedToolCall[];
  /** The provider signalled the end of the answer. */
  done: boolean;
  /** The provider reported the input tokens; else `usage.input` is the request's estimate. */
  inputReported: boolean;
  /** The tier the answer says it is served at, once it says. */
  serviceTier: ServiceTier | undefined;
  /** Bytes to pass to the client now: whole events only; the incomplete tail is held back. */
  forward: Uint8Array;
}

export interface StreamMeter {
  /**
   * Meters the events `chunk` completes one at a time, yielding the progress after each (its
   * `forward` is that event's bytes), so a cut lands on the event that crossed a limit. Resuming
   * the iteration means the previous `forward` was passed on. Throws SvcError SVC-SYS-9009 when
   * an event exceeds the event limit: end the stream with `errorEvent` then.
   */
  push(chunk: Uint8Array): Iterable<StreamProgress>;
  /**
   * Upstream closed: releases any unterminated last event, the output counted exactly where the
   * provider reported none. `done` still false means the answer was cut short.
   */
  end(): Promise<StreamProgress>;
  /**
   * The progress so far with the output counted exactly (with tiktoken, text counted once, a
   * large text on the token thread), for a decision the running bound would change: a cut, or a
   * charge of a stream that ended early. Nothing may be pushed until it resolves.
   */
  exact(): Promise<StreamProgress>;
  /** Bytes that end the stream with an error the client's SDK raises; send after the last `forward` passed on. */
  errorEvent(svcCode: SvcCode, message: string): Uint8Array;
}

/**
 * The request's input tokens where an answer reports none: a count, or a function that counts
 * exactly when called (the proxy counts only when it needs the figure, docs/performance.md).
 */
export type InputEstimate = number | (() => number);

export function resolveInput(estimate: InputEstimate | undefined): number {
  return typeof estimate === 'function' ? estimate() : (estimate ?? 0);
}

export interface StreamMeterOptions {
  /** Read at every step until the provider reports input; read once more for the final reading. */
  estimatedInputTokens?: InputEstimate;
  hideStreamUsage?: boolean;
}

export interface ErrorReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface ProviderAdapter {
  readonly id: ProviderId;
  /** Hosts intercepted by default; `*.` matches any subdomain. */
  readonly hosts: readonly string[];
  /** Path prefix that selects this provider in reverse-proxy mode. */
  readonly reversePrefix: string;
  /** The request's route: metered (with its operation), free, or null when it matches none (docs/providers.md). */
  route(method: string, path: string): RouteMatch;
  /** The metered operation of a request, or null when it is not a metered route. */
  classify(method: string, path: string): Operation | null;
  /**
   * Where the provider serves the model a URL names (Gemini's `models/{model}`, Azure's
   * deployments), that model, read from any path in any spelling a lenient server may route:
   * an unclassified call is judged and priced as it, not as what its body claims.
   */
  modelNamedIn?(path: string): string | undefined;
  /**
   * A parameter of the request (in its query or headers) that has the provider leave out of its
   * answer what the proxy meters or judges, such as a response field mask, or write the answer in
   * a form the proxy does not read; its name, for the refusal, or undefined.
   */
  hidingParameter?(url: URL, headers: IncomingHttpHeaders): string | undefined;
  /** Throws SvcError SVC-SYS-9002 naming the field when the body is not a valid request. */
  parseRequest(op: Operation, body: unknown, path: string): ParsedRequest;
  prepareRequest(op: Operation, body: unknown): PreparedRequest;
  /** Reads a non-streamed answer; `estimatedInputTokens` stands in if it reports no usage. */
  readResponse(op: Operation, json: unknown, estimatedInputTokens?: InputEstimate): ResponseReading;
  /**
   * The tool calls of stored answers read back (JSON Lines shapes as the array of their lines);
   * only a provider with `stored` routes has them, undefined for a shape it does not serve.
   */
  storedToolCalls?(shape: StoredShape, json: unknown): ToolCall[] | undefined;
  createStreamMeter(op: Operation, model: string, options?: StreamMeterOptions): StreamMeter;
  /** A refusal in the provider's error format, with the SVC code in message and code fields. */
  errorResponse(svcCode: SvcCode, message: string, status?: number): ErrorReply;
  /** An SSE error event in the provider's format that ends a stream. */
  streamErrorEvent(svcCode: SvcCode, message: string): Uint8Array;
}

/** What adapters are built from: a shared token counter, the per-model answer bound, the event bound. */
export interface AdapterDeps {
  tokens: TokenCounter;
  /** The largest stream event a meter holds; a larger one ends the stream with an error event. */
  maxEventBytes: number;
  /** Output bound for a request that sets none (e.g. the price table's max_output_tokens). */
  defaultMaxOutputTokens(model: string): number;
  /**
   * Characters of a streamed tool call's arguments a meter keeps: as many as a call may hold
   * before its stream is cut (the event bound), and more than the Semantic Judge reads, so a
   * longer call is judged `truncated` there (fail closed); beyond them the rest is dropped.
   */
  maxToolArgsChars: number;
  /**
   * Input tokens counted for context a request refers to on the provider's side, which the proxy
   * cannot see: reserved before the call, charged when the provider reports no usage.
   */
  serverContextTokens: number;
}
