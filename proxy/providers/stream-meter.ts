import {
  mostUses,
  type HostedTool,
  type HostedUses,
  type ServiceTier,
  type TokenUsage,
} from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
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
  let reportedInput: number | undefined;
  let reportedOutput: number | undefined;
  let reportedCached: number | undefined;
  let reportedWrite = 0;
  let reportedWriteLong = 0;
  let finalUsage = false;
  /** Hosted-tool uses: as reported (cumulative), and by the ids seen in the answer. */
  let reportedHosted: HostedUses = {};
  const hostedSeen = new HostedTally();
  let hostedChanged = false;
  // Output is metered by its UTF-8 bytes, an upper bound of its tokens for a byte-level BPE
  // encoding (every token covers at least one byte), and counted with tiktoken only when that
  // bound would decide something: a cut, or a charge without the provider's usage. Text counted
  // once is not counted again: `counted` tokens, then `uncounted` text of `uncountedBytes`.
  let counted = 0;
  let uncounted = '';
  let uncountedBytes = 0;
  /** Bytes of text past UNCOUNTED_TEXT_LIMIT: metered by their bound, never counted. */
  let boundOnly = 0;
  let done = false;
  const toolCalls: StreamedToolCall[] = [];
  // Made at the first tool call: most answers have none, and a stream's state lives as long as it.
  let open: Map<string, StreamedToolCall> | undefined;
  /**
   * A key names one call until it ends, yet a provider may name it again before then: whole
   * again, in pieces, or for the next call in the same place. Clients read that differently: the
   * Python SDK and LangChain join every piece of a call's index into one name, others tell the
   * calls apart. Each reading is judged: the call so far ends where the next name comes (`open`),
   * and from the second name on, the names joined are one more call (`joined`).
   */
  let joined: Map<string, StreamedToolCall> | undefined;
  const bounded = (args: string) => (args.length > ctx.maxToolArgsChars ? args.slice(0, ctx.maxToolArgsChars) : args);
  const begin = (name: string, args: string): StreamedToolCall => {
    const call: StreamedToolCall = { name: bounded(name), arguments: bounded(args), complete: false };
    toolCalls.push(call);
    return call;
  };
  const append = (call: StreamedToolCall | undefined, delta: string) => {
    if (call !== undefined && call.arguments.length < ctx.maxToolArgsChars)
      call.arguments = bounded(call.arguments + delta);
  };
  const close = (call: StreamedToolCall | undefined, args: string | undefined) => {
    if (call === undefined) return;
    if (args !== undefined) call.arguments = bounded(args);
    call.complete = true;
  };
  // Every finish and the stream's end close all calls: an answer without any allocates nothing here.
  const closeAll = (calls: Map<string, StreamedToolCall> | undefined) => {
    if (calls === undefined || calls.size === 0) return;
    for (const call of calls.values()) close(call, undefined);
    calls.clear();
  };

  const acc: StreamAccumulator = {
    reportServiceTier(tier) {
      current.serviceTier = tier;
    },
    hostedUse(tool, id) {
      if (hostedSeen.use(tool, id)) hostedChanged = true;
    },
    reportUsage(usage, final) {
      if (usage.hosted !== undefined) {
        reportedHosted = mostUses(reportedHosted, usage.hosted);
        hostedChanged = true;
      }
      if (usage.input !== undefined) reportedInput = usage.input;
      if (usage.cachedInput !== undefined) reportedCached = usage.cachedInput;
      if (usage.cacheWrite !== undefined) reportedWrite = usage.cacheWrite;
      if (usage.cacheWriteLong !== undefined) reportedWriteLong = usage.cacheWriteLong;
      if (usage.output !== undefined) reportedOutput = usage.output;
      // A final report without a readable output count says nothing of the whole answer (an
      // earlier count, Anthropic's `output_tokens: 1` at the start, least of all): it is metered.
      else if (final) reportedOutput = undefined;
      if (final) finalUsage = true;
    },
    text(delta) {
      if (finalUsage) return;
      const bytes = Buffer.byteLength(delta);
      if (uncounted.length + delta.length > UNCOUNTED_TEXT_LIMIT) boundOnly += bytes;
      else {
        uncounted += delta;
        uncountedBytes += bytes;
      }
    },
    toolStart(key, name, args = '') {
      const previous = open?.get(key);
      if (previous !== undefined) {
        close(previous, undefined);
        joined ??= new Map();
        const join = joined.get(key);
        if (join === undefined) joined.set(key, begin(previous.name + name, previous.arguments + args));
        else {
          join.name = bounded(join.name + name);
          append(join, args);
        }
      }
      (open ??= new Map()).set(key, begin(name, args));
    },
    toolArgs(key, delta) {
      append(open?.get(key), delta);
      append(joined?.get(key), delta);
    },
    toolEnd(key, args) {
      if (key === undefined) {
        closeAll(open);
        closeAll(joined);
        return;
      }
      close(open?.get(key), args);
      close(joined?.get(key), args);
      open?.delete(key);
      joined?.delete(key);
    },
    finish() {
      done = true;
      acc.toolEnd();
    },
  };

  const visit = (event: SseEvent): boolean => dialect.onEvent(event, acc);
  // A frame that is no event still reaches the client, so it is metered like data no dialect
  // reads (eventObject): as text, until the provider's final usage replaces the estimate.
  const sse = () => createSseFramer(visit, ctx.maxEventBytes, (frame) => acc.text(frame));
  let framer: Framer | null = dialect.framing === 'sse' ? sse() : null;

  /** Bytes looked at before the framing was known: a byte order mark may only open the stream. */
  let sniffed = 0;

  function sniff(chunk: Uint8Array): Framer | null {
    for (const b of chunk) {
      // The client skips a UTF-8 byte order mark, so the framing is what follows it.
      const mark = sniffed < UTF8_BOM.length && b === UTF8_BOM[sniffed];
      sniffed++;
      if (mark || isWhitespace(b)) continue;
      if (b === OPEN_BRACKET) return createJsonArrayFramer(visit, ctx.maxEventBytes);
      return b === OPEN_BRACE ? createJsonDocumentFramer(visit, ctx.maxEventBytes) : sse();
    }
    return null;
  }

  /**
   * Counts the text not yet counted, once (a large text on the token thread, so the loop stays
   * free): the bound of the output becomes its exact count. Not needed once the provider reported
   * the output itself.
   */
  async function countExactly(): Promise<void> {
    if (finalUsage && reportedOutput !== undefined) return;
    const text = uncounted;
    if (text.length === 0) return;
    const bytes = uncountedBytes;
    const tokens = await ctx.tokens.exactly(() => ctx.tokens.countText(ctx.model, text));
    // Only appended to meanwhile: what was counted is the start of it.
    uncounted = uncounted.slice(text.length);
    uncountedBytes -= bytes;
    counted += tokens;
  }

  // One object for the whole stream, brought up to date at each step: an event makes no garbage here.
  const current: StreamProgress = {
    usage: { input: 0, output: 0, cachedInput: 0 },
    usageSource: 'estimated',
    toolCalls,
    done: false,
    inputReported: false,
    serviceTier: undefined,
    forward: EMPTY,
  };

  function progress(forward: Uint8Array): StreamProgress {
    const metered = counted + uncountedBytes + boundOnly;
    const input = reportedInput ?? resolveInput(ctx.estimatedInputTokens);
    const usage = current.usage;
    usage.input = input;
    usage.output = finalUsage ? (reportedOutput ?? metered) : Math.max(reportedOutput ?? 0, metered);
    usage.cachedInput = Math.min(reportedCached ?? 0, input);
    // Named only when the provider reports cache writes, which only Anthropic's streams do.
    if (reportedWrite > 0 || reportedWriteLong > 0) {
      usage.cacheWrite = reportedWrite;
      usage.cacheWriteLong = reportedWriteLong;
    }
    if (hostedChanged) {
      // Each tool's uses: the most the usage reported or the ids showed.
      usage.hosted = mostUses(reportedHosted, hostedSeen.uses());
      hostedChanged = false;
    }
    current.usageSource = finalUsage ? 'provider' : 'estimated';
    current.done = done;
    current.inputReported = reportedInput !== undefined;
    current.forward = forward;
    return current;
  }

  return {
    *push(chunk) {
      framer ??= sniff(chunk);
      if (framer === null) {
        // Only whitespace so far: nothing to meter, and harmless to pass on.
        if (chunk.length > 0) yield progress(chunk);
        return;
      }
      for (const forward of framer.push(chunk)) yield progress(forward);
    },
    async exact() {
      await countExactly();
      return progress(EMPTY);
    },
    async end() {
      const forward = framer ? framer.end() : EMPTY;
      // The answer is whole: without the provider's usage it is charged at its exact count.
      await countExactly();
      const last = progress(forward);
      // The answer ended: whatever a call has by now is all it will get.
      acc.toolEnd();
      return last;
    },
    errorEvent(svcCode, message) {
      const payload = streamErrorPayload(dialect.errorFormat, svcCode, message);
      return (framer ?? sse()).errorFrame(dialect.errorFormat.streamEventName, payload);
    },
  };
}
