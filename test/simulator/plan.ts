import type { IncomingHttpHeaders } from 'node:http';
import { ERROR_CATALOGUE, type SvcCode } from '../../core/errors/index.ts';

/**
 * Every word is one token in both o200k_base and cl100k_base, and so is any run of them, so
 * an answer of N words is N tokens whichever way it is counted.
 */
const WORDS = [
  ' one',
  ' two',
  ' three',
  ' four',
  ' five',
  ' six',
  ' seven',
  ' eight',
  ' nine',
  ' ten',
  ' red',
  ' blue',
  ' green',
  ' cat',
  ' dog',
  ' sun',
  ' sky',
  ' sea',
  ' tree',
  ' book',
];

export const DEFAULT_OUTPUT_TOKENS = 8;

/** Everything a simulated answer is derived from; the same request always gets the same answer. */
export interface ReplyPlan {
  model: string;
  words: string[];
  inputTokens: number;
  cachedTokens: number;
  /** Input tokens written to Anthropic's prompt cache, kept five minutes and kept the hour. */
  cacheWriteTokens: number;
  cacheWriteLongTokens: number;
  toolCall: string | undefined;
  /** The tool call's arguments (JSON text), else `{"input": <the words>}`. */
  toolArgs: string | undefined;
  /**
   * The kind of tool called: a function (the default); `custom`, a custom tool's call with
   * free-text `input` (Responses); `hosted`, one the provider runs itself (Responses: a remote MCP
   * server's tool, `mcp_call`; Anthropic: a server tool, `server_tool_use`).
   */
  toolKind: 'function' | 'custom' | 'hosted';
  delayMs: number;
  errorCode: SvcCode | undefined;
  /** With `errorCode`: the stream fails after this many deltas instead of the call being refused. */
  streamErrorAfter: number | undefined;
  /** A pause before the answer's headers, as a model thinking before its first byte. */
  firstByteDelayMs: number;
  /** A pause between a stream's headers and its first event. */
  firstEventDelayMs: number;
  /** A pause between a stream's last event and the end of its body, the connection held open. */
  endDelayMs: number;
  /** The connection is reset once this many bytes of the answer's body went out. */
  resetAfterBytes: number | undefined;
  /** The tier an OpenAI answer says it was served at, whatever the request asked (`x-sim-service-tier`). */
  serviceTier: string | undefined;
  /**
   * Searches the provider ran for the answer (`x-sim-web-searches`): Anthropic reports them in its
   * usage, OpenAI's Responses answers carry a web search call each, Gemini's grounding metadata
   * lists them as its queries.
   */
  webSearches: number;
  /**
   * Images OpenAI's image generation tool made for a Responses answer, each `quality/size`
   * (`x-sim-images: low/1024x1024,high/1536x1024`).
   */
  images: string[];
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function intHeader(headers: IncomingHttpHeaders, name: string): number | undefined {
  const v = header(headers, name);
  if (v === undefined) return undefined;
  const n = Number.parseInt(v, 10);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

function svcCodeHeader(headers: IncomingHttpHeaders): SvcCode | undefined {
  const code = header(headers, 'x-sim-error-code');
  if (code === undefined) return undefined;
  if (!Object.hasOwn(ERROR_CATALOGUE, code)) throw new Error(`x-sim-error-code: unknown SVC code ${code}`);
  return code as SvcCode;
}

const TOOL_KINDS = ['function', 'custom', 'hosted'] as const;

function toolKindHeader(value: string | undefined): ReplyPlan['toolKind'] {
  if (value === undefined) return 'function';
  const kind = TOOL_KINDS.find((k) => k === value);
  if (kind === undefined) throw new Error(`x-sim-tool-kind: one of ${TOOL_KINDS.join(', ')}, not ${value}`);
  return kind;
}

export function replyWords(count: number): string[] {
  return Array.from({ length: count }, (_, i) => WORDS[i % WORDS.length] ?? ' one');
}

export interface PlanInput {
  headers: IncomingHttpHeaders;
  bodyBytes: number;
  model: string;
  /** The request's own answer limit, if it set one. */
  maxTokens: number | undefined;
  defaultDelayMs: number;
}

/**
 * Output: `x-sim-output-tokens`, else the request's max tokens, else 8. Input: `x-sim-input-tokens`,
 * else a quarter of the body's bytes, deliberately not a tiktoken count, so tests can tell the
 * provider's reported usage from the proxy's own estimate.
 */
export function planReply(input: PlanInput): ReplyPlan {
  const { headers } = input;
  const outputTokens = intHeader(headers, 'x-sim-output-tokens') ?? input.maxTokens ?? DEFAULT_OUTPUT_TOKENS;
  const inputTokens = intHeader(headers, 'x-sim-input-tokens') ?? Math.ceil(input.bodyBytes / 4);
  return {
    model: input.model,
    words: replyWords(outputTokens),
    inputTokens,
    cachedTokens: Math.min(intHeader(headers, 'x-sim-cached-tokens') ?? 0, inputTokens),
    cacheWriteTokens: intHeader(headers, 'x-sim-cache-write-tokens') ?? 0,
    cacheWriteLongTokens: intHeader(headers, 'x-sim-cache-write-long-tokens') ?? 0,
    toolCall: header(headers, 'x-sim-tool-call'),
    toolArgs: header(headers, 'x-sim-tool-args'),
    toolKind: toolKindHeader(header(headers, 'x-sim-tool-kind')),
    delayMs: intHeader(headers, 'x-sim-chunk-delay-ms') ?? input.defaultDelayMs,
    errorCode: svcCodeHeader(headers),
    streamErrorAfter: intHeader(headers, 'x-sim-stream-error-after'),
    firstByteDelayMs: intHeader(headers, 'x-sim-first-byte-delay-ms') ?? 0,
    firstEventDelayMs: intHeader(headers, 'x-sim-first-event-delay-ms') ?? 0,
    endDelayMs: intHeader(headers, 'x-sim-end-delay-ms') ?? 0,
    resetAfterBytes: intHeader(headers, 'x-sim-reset-after-bytes'),
    serviceTier: header(headers, 'x-sim-service-tier'),
    webSearches: intHeader(headers, 'x-sim-web-searches') ?? 0,
    images:
      header(headers, 'x-sim-images')
        ?.split(',')
        .filter((image) => image !== '') ?? [],
  };
}
