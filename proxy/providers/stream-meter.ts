import {
  mostUses,
  type HostedTool,
  type HostedUses,
  type ServiceTier,
  type TokenUsage,
} from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { SvcCode } from '../../core/errors/index.ts';
import {
  resolveInput,
  type InputEstimate,
  type StreamedToolCall,
  type StreamMeter,
  type StreamProgress,
} from './adapter.ts';
import { streamErrorPayload, type ErrorFormat } from './error-format.ts';
import { HostedTally } from './hosted-tally.ts';
import { createJsonArrayFramer, createJsonDocumentFramer } from './json-array-framer.ts';
import { asObject, parseJson, type JsonObject } from './json-access.ts';
import { createSseFramer, EMPTY, type Framer, type SseEvent } from './sse-framer.ts';

/** What a provider's stream events tell the meter. */
export interface StreamAccumulator {
  /** Usage as the provider reports it; `final` marks the totals of the whole answer. */
  reportUsage(usage: Partial<TokenUsage>, final: boolean): void;
  /** The tier the provider says it serves the answer at. */
  reportServiceTier(tier: ServiceTier): void;
  /**
   * One use of a tool the provider bills per use, named by `id` (a search call's, a container's):
   * an id seen again is the same use, billed at the fee its latest reading names (an image's
   * quality, known once it is done). Counted with the uses the provider's usage reports, the
   * larger of the two.
   */
  hostedUse(tool: HostedTool, id: string): void;
  /** Generated text (or tool arguments), metered while no final usage is known. */
  text(delta: string): void;
  /** A tool call begins (`key` tells calls of one answer apart), with arguments when they come whole. */
  toolStart(key: string, name: string, args?: string): void;
  toolArgs(key: string, delta: string): void;
  /** The call's arguments are complete (replaced by `args` when given); no key: every open call. */
  toolEnd(key?: string, args?: string): void;
  finish(): void;
}

/** One provider's reading of its stream events; returns false to hide an event from the client. */
export interface StreamDialect {
  /**
   * `auto`: SSE, a streamed JSON array when the first byte is `[` (Gemini without `alt=sse`), or one
   * JSON document when it is `{` (a server that ignored the stream flag).
   */
  framing: 'sse' | 'auto';
  onEvent(event: SseEvent, acc: StreamAccumulator): boolean;
  errorFormat: ErrorFormat;
}

/**
 * An event's data as the JSON object a dialect reads. Data that is not one still goes on to the
 * client, so it is metered as generated text, by its bytes, until the provider's final usage
 * replaces the estimate: what the proxy passes on unread is never metered at zero.
 */
export function eventObject(event: SseEvent, acc: StreamAccumulator): JsonObject | undefined {
  const json = asObject(parseJson(event.data));
  if (json === undefined) acc.text(event.data);
  return json;
}

export interface StreamMeterContext {
  model: string;
  tokens: TokenCounter;
  /** Input tokens estimated from the request, used until the provider reports its own count. */
  estimatedInputTokens: InputEstimate;
  /** The largest event the framer holds (proxy_stream_event_limit_bytes). */
  maxEventBytes: number;
  /** Characters of a tool call's arguments kept (AdapterDeps.maxToolArgsChars). */
  maxToolArgsChars: number;
}

/**
 * Characters of generated text kept for an exact count should the provider report no usage. Past
 * it, text is metered by its byte bound alone, so the meter holds no more than this per stream.
 */
export const UNCOUNTED_TEXT_LIMIT = 256 * 1024;

const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const UTF8_BOM = [0xef, 0xbb, 0xbf];

function isWhitespace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

export function createStreamMeter(dialect: StreamDialect, ctx: StreamMeterContext): StreamMeter {
  return new Meter(dialect, ctx);
}

/**
 * The meter and the accumulator its dialect reports to, as one object with fields, not a set of
 * closures: a stream's meter lives as long as the stream.
 */
class Meter implements StreamMeter, StreamAccumulator {
  readonly #dialect: StreamDialect;
  readonly #ctx: StreamMeterContext;
  #reportedInput: number | undefined;
  #reportedOutput: number | undefined;
  #reportedCached: number | undefined;
  #reportedWrite = 0;
  #reportedWriteLong = 0;
  #finalUsage = false;
  /** Hosted-tool uses: as reported (cumulative), and by the ids seen in the answer. */
  #reportedHosted: HostedUses = {};
  readonly #hostedSeen = new HostedTally();
  #hostedChanged = false;
  // Output is metered by its UTF-8 bytes, an upper bound of its tokens for a byte-level BPE
  // encoding (every token covers at least one byte), and counted with tiktoken only when that
  // bound would decide something: a cut, or a charge without the provider's usage. Text counted
  // once is not counted again: `counted` tokens, then `uncounted` text of `uncountedBytes`.
  #counted = 0;
  #uncounted = '';
  #uncountedBytes = 0;
  /** Bytes of text past UNCOUNTED_TEXT_LIMIT: metered by their bound, never counted. */
  #boundOnly = 0;
  #done = false;
  readonly #toolCalls: StreamedToolCall[] = [];
  // Made at the first tool call: most answers have none, and a stream's state lives as long as it.
  #open: Map<string, StreamedToolCall> | undefined;
  /**
   * A key names one call until it ends, yet a provider may name it again before then: whole
   * again, in pieces, or for the next call in the same place. Clients read that differently: the
   * Python SDK and LangChain join every piece of a call's index into one name, others tell the
   * calls apart. Each reading is judged: the call so far ends where the next name comes (`open`),
   * and from the second name on, the names joined are one more call (`joined`).
   */
  #joined: Map<string, StreamedToolCall> | undefined;
  readonly #visit = (event: SseEvent): boolean => this.#dialect.onEvent(event, this);
  #framer: Framer | null;
  /** Bytes looked at before the framing was known: a byte order mark may only open the stream. */
  #sniffed = 0;
  // One object for the whole stream, brought up to date at each step: an event makes no garbage here.
  readonly #current: StreamProgress;

  constructor(dialect: StreamDialect, ctx: StreamMeterContext) {
    this.#dialect = dialect;
    this.#ctx = ctx;
    this.#current = {
      usage: { input: 0, output: 0, cachedInput: 0 },
      usageSource: 'estimated',
      toolCalls: this.#toolCalls,
      done: false,
      inputReported: false,
      serviceTier: undefined,
      forward: EMPTY,
    };
    this.#framer = dialect.framing === 'sse' ? this.#sse() : null;
  }

  reportServiceTier(tier: ServiceTier): void {
    this.#current.serviceTier = tier;
  }

  hostedUse(tool: HostedTool, id: string): void {
    if (this.#hostedSeen.use(tool, id)) this.#hostedChanged = true;
  }

  reportUsage(usage: Partial<TokenUsage>, final: boolean): void {
    if (usage.hosted !== undefined) {
      this.#reportedHosted = mostUses(this.#reportedHosted, usage.hosted);
      this.#hostedChanged = true;
    }
    if (usage.input !== undefined) this.#reportedInput = usage.input;
    if (usage.cachedInput !== undefined) this.#reportedCached = usage.cachedInput;
    if (usage.cacheWrite !== undefined) this.#reportedWrite = usage.cacheWrite;
    if (usage.cacheWriteLong !== undefined) this.#reportedWriteLong = usage.cacheWriteLong;
    if (usage.output !== undefined) this.#reportedOutput = usage.output;
    // A final report without a readable output count says nothing of the whole answer (an
    // earlier count, Anthropic's `output_tokens: 1` at the start, least of all): it is metered.
    else if (final) this.#reportedOutput = undefined;
    if (final) this.#finalUsage = true;
  }

  text(delta: string): void {
    if (this.#finalUsage) return;
    const bytes = Buffer.byteLength(delta);
    if (this.#uncounted.length + delta.length > UNCOUNTED_TEXT_LIMIT) this.#boundOnly += bytes;
    else {
      this.#uncounted += delta;
      this.#uncountedBytes += bytes;
    }
  }

  toolStart(key: string, name: string, args = ''): void {
    const previous = this.#open?.get(key);
    if (previous !== undefined) {
      close(previous, undefined, this.#ctx.maxToolArgsChars);
      this.#joined ??= new Map();
      const join = this.#joined.get(key);
      if (join === undefined) this.#joined.set(key, this.#begin(previous.name + name, previous.arguments + args));
      else {
        join.name = bounded(join.name + name, this.#ctx.maxToolArgsChars);
        append(join, args, this.#ctx.maxToolArgsChars);
      }
    }
    (this.#open ??= new Map()).set(key, this.#begin(name, args));
  }

  toolArgs(key: string, delta: string): void {
    append(this.#open?.get(key), delta, this.#ctx.maxToolArgsChars);
    append(this.#joined?.get(key), delta, this.#ctx.maxToolArgsChars);
  }

  toolEnd(key?: string, args?: string): void {
    const max = this.#ctx.maxToolArgsChars;
    if (key === undefined) {
      closeAll(this.#open, max);
      closeAll(this.#joined, max);
      return;
    }
    close(this.#open?.get(key), args, max);
    close(this.#joined?.get(key), args, max);
    this.#open?.delete(key);
    this.#joined?.delete(key);
  }

  finish(): void {
    this.#done = true;
    this.toolEnd();
  }

  *push(chunk: Uint8Array): Generator<StreamProgress, void, undefined> {
    this.#framer ??= this.#sniff(chunk);
    if (this.#framer === null) {
      // Only whitespace so far: nothing to meter, and harmless to pass on.
      if (chunk.length > 0) yield this.#progress(chunk);
      return;
    }
    for (const forward of this.#framer.push(chunk)) yield this.#progress(forward);
  }

  async exact(): Promise<StreamProgress> {
    await this.#countExactly();
    return this.#progress(EMPTY);
  }

  async end(): Promise<StreamProgress> {
    const forward = this.#framer ? this.#framer.end() : EMPTY;
    // The answer is whole: without the provider's usage it is charged at its exact count.
    await this.#countExactly();
    const last = this.#progress(forward);
    // The answer ended: whatever a call has by now is all it will get.
    this.toolEnd();
    return last;
  }

  errorEvent(svcCode: SvcCode, message: string): Uint8Array {
    const format = this.#dialect.errorFormat;
    const payload = streamErrorPayload(format, svcCode, message);
    return (this.#framer ?? this.#sse()).errorFrame(format.streamEventName, payload);
  }

  #begin(name: string, args: string): StreamedToolCall {
    const max = this.#ctx.maxToolArgsChars;
    const call: StreamedToolCall = { name: bounded(name, max), arguments: bounded(args, max), complete: false };
    this.#toolCalls.push(call);
    return call;
  }

  // A frame that is no event still reaches the client, so it is metered like data no dialect
  // reads (eventObject): as text, until the provider's final usage replaces the estimate.
  #sse(): Framer {
    return createSseFramer(this.#visit, this.#ctx.maxEventBytes, (frame) => this.text(frame));
  }

  #sniff(chunk: Uint8Array): Framer | null {
    for (const b of chunk) {
      // The client skips a UTF-8 byte order mark, so the framing is what follows it.
      const mark = this.#sniffed < UTF8_BOM.length && b === UTF8_BOM[this.#sniffed];
      this.#sniffed++;
      if (mark || isWhitespace(b)) continue;
      if (b === OPEN_BRACKET) return createJsonArrayFramer(this.#visit, this.#ctx.maxEventBytes);
      return b === OPEN_BRACE ? createJsonDocumentFramer(this.#visit, this.#ctx.maxEventBytes) : this.#sse();
    }
    return null;
  }

  /**
   * Counts the text not yet counted, once (a large text on the token thread, so the loop stays
   * free): the bound of the output becomes its exact count. Not needed once the provider reported
   * the output itself.
   */
  async #countExactly(): Promise<void> {
    if (this.#finalUsage && this.#reportedOutput !== undefined) return;
    const text = this.#uncounted;
    if (text.length === 0) return;
    const bytes = this.#uncountedBytes;
    const ctx = this.#ctx;
    const tokens = await ctx.tokens.exactly(() => ctx.tokens.countText(ctx.model, text));
    // Only appended to meanwhile: what was counted is the start of it.
    this.#uncounted = this.#uncounted.slice(text.length);
    this.#uncountedBytes -= bytes;
    this.#counted += tokens;
  }

  #progress(forward: Uint8Array): StreamProgress {
    const current = this.#current;
    const metered = this.#counted + this.#uncountedBytes + this.#boundOnly;
    const input = this.#reportedInput ?? resolveInput(this.#ctx.estimatedInputTokens);
    const usage = current.usage;
    usage.input = input;
    usage.output = this.#finalUsage ? (this.#reportedOutput ?? metered) : Math.max(this.#reportedOutput ?? 0, metered);
    usage.cachedInput = Math.min(this.#reportedCached ?? 0, input);
    // Named only when the provider reports cache writes, which only Anthropic's streams do.
    if (this.#reportedWrite > 0 || this.#reportedWriteLong > 0) {
      usage.cacheWrite = this.#reportedWrite;
      usage.cacheWriteLong = this.#reportedWriteLong;
    }
    if (this.#hostedChanged) {
      // Each tool's uses: the most the usage reported or the ids showed.
      usage.hosted = mostUses(this.#reportedHosted, this.#hostedSeen.uses());
      this.#hostedChanged = false;
    }
    current.usageSource = this.#finalUsage ? 'provider' : 'estimated';
    current.done = this.#done;
    current.inputReported = this.#reportedInput !== undefined;
    current.forward = forward;
    return current;
  }
}

function bounded(args: string, max: number): string {
  return args.length > max ? args.slice(0, max) : args;
}

function append(call: StreamedToolCall | undefined, delta: string, max: number): void {
  if (call !== undefined && call.arguments.length < max) call.arguments = bounded(call.arguments + delta, max);
}

function close(call: StreamedToolCall | undefined, args: string | undefined, max: number): void {
  if (call === undefined) return;
  if (args !== undefined) call.arguments = bounded(args, max);
  call.complete = true;
}

// Every finish and the stream's end close all calls: an answer without any allocates nothing here.
function closeAll(calls: Map<string, StreamedToolCall> | undefined, max: number): void {
  if (calls === undefined || calls.size === 0) return;
  for (const call of calls.values()) close(call, undefined, max);
  calls.clear();
}
