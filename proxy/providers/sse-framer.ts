import { SvcError } from '../../core/errors/index.ts';

/** One server-sent event as the client would see it. */
export interface SseEvent {
  event: string | undefined;
  data: string;
  id?: string | undefined;
  retry?: string | undefined;
}

/**
 * What becomes of one complete event: `true` passes its bytes on unchanged, `false` hides it,
 * bytes replace it (an event rewritten by the visitor).
 */
export type EventVerdict = boolean | Uint8Array;

/** Sees each complete event once, in order. */
export type EventVisitor = (event: SseEvent) => EventVerdict;

/**
 * Sees the text of each frame that is no event (a comment, a lone `id` or `retry`, fields the
 * client does not know): the client dispatches nothing for it, and it is passed on as it came.
 */
export type UnreadVisitor = (frame: string) => void;

/**
 * Splits a byte stream into complete frames as chunks arrive (a chunk may end anywhere, even
 * inside a UTF-8 character), and says which bytes may go on to the client: only whole frames,
 * so a stream can be cut between two frames and an error frame appended cleanly.
 *
 * `push` yields once per frame the chunk completes, with the bytes to pass on for it. Resuming
 * the iteration means the bytes yielded before were passed on; a caller that stops iterating (a
 * cut) has passed on what it wrote and nothing after. A frame larger than the framer's limit, or
 * an incomplete one grown past it, throws SvcError SVC-SYS-9009: the framer never holds more
 * than the limit plus one chunk.
 */
export interface Framer {
  push(chunk: Uint8Array): Generator<Uint8Array, void, undefined>;
  /** Upstream ended: the last frame, even if unterminated, is visited and released. */
  end(): Uint8Array;
  /** Bytes that end the stream with `payload` as an error frame in this framing. */
  errorFrame(eventName: string | undefined, payload: unknown): Uint8Array;
  readonly closed: boolean;
}

/** The largest event a framer holds unless configured otherwise (proxy_stream_event_limit_bytes). */
export const DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024;

export const EMPTY = new Uint8Array(0);
const LF = 0x0a;
const CR = 0x0d;
const encoder = new TextEncoder();
// Each frame is decoded whole (never a part of a character), so one decoder serves every framer.
const decoder = new TextDecoder();

export function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

export function encodeText(text: string): Uint8Array {
  return encoder.encode(text);
}

/** The text of one whole frame. */
export function decodeFrame(frame: Uint8Array): string {
  return decoder.decode(frame);
}

export function eventTooLarge(limit: number): SvcError {
  return new SvcError('SVC-SYS-9009', `stream event larger than ${limit} bytes`, { limit });
}

/**
 * The bytes of the frame being assembled, held as the pieces they arrived in and joined once
 * the frame is complete, so a large frame costs one copy, not one per chunk.
 */
export class HeldBytes {
  #pieces: Uint8Array[] = [];
  #length = 0;
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get length(): number {
    return this.#length;
  }

  /** Keeps a copy of `piece` (the caller's buffer may be reused); throws past the limit. */
  hold(piece: Uint8Array): void {
    if (piece.length === 0) return;
    this.#check(piece.length);
    this.#pieces.push(piece.slice());
    this.#length += piece.length;
  }

  /** The held bytes followed by `tail`, as one frame; empties the hold. */
  take(tail: Uint8Array): Uint8Array {
    this.#check(tail.length);
    const pieces = this.#pieces;
    const length = this.#length;
    this.#pieces = [];
    this.#length = 0;
    if (pieces.length === 0) return tail;
    const out = new Uint8Array(length + tail.length);
    let at = 0;
    for (const p of pieces) {
      out.set(p, at);
      at += p.length;
    }
    out.set(tail, at);
    return out;
  }

  #check(more: number): void {
    if (this.#length + more > this.#limit) {
      this.#pieces = [];
      this.#length = 0;
      throw eventTooLarge(this.#limit);
    }
  }
}

const COLON = 0x3a;
const SPACE = 0x20;

/** Whether `text` from `start` to `end` is the field name `name`. */
function isField(text: string, start: number, end: number, name: string): boolean {
  return end - start === name.length && text.startsWith(name, start);
}

/**
 * The event's fields, line by line, without splitting it into an array of lines: on the hot path
 * an event is usually one `data:` line, and only its value is cut out of the text.
 */
function parseSseEvent(text: string): SseEvent | null {
  let event: string | undefined;
  let data: string | null = null;
  let id: string | undefined;
  let retry: string | undefined;
  // CRs are rare: searched for again only once passed.
  let nextCr = text.indexOf('\r');
  for (let start = 0; start < text.length;) {
    if (nextCr !== -1 && nextCr < start) nextCr = text.indexOf('\r', start);
    const lf = text.indexOf('\n', start);
    const end = lf === -1 ? (nextCr === -1 ? text.length : nextCr) : nextCr === -1 ? lf : Math.min(lf, nextCr);
    if (end > start && text.charCodeAt(start) !== COLON) {
      const colon = text.indexOf(':', start);
      const named = colon !== -1 && colon < end;
      const fieldEnd = named ? colon : end;
      let valueStart = named ? colon + 1 : end;
      if (valueStart < end && text.charCodeAt(valueStart) === SPACE) valueStart++;
      if (isField(text, start, fieldEnd, 'data')) {
        const value = text.slice(valueStart, end);
        data = data === null ? value : data + '\n' + value;
      } else if (isField(text, start, fieldEnd, 'event')) event = text.slice(valueStart, end);
      else if (isField(text, start, fieldEnd, 'id')) id = text.slice(valueStart, end);
      else if (isField(text, start, fieldEnd, 'retry')) retry = text.slice(valueStart, end);
    }
    // A CRLF ends one line.
    start = end + (text.charCodeAt(end) === CR && text.charCodeAt(end + 1) === LF ? 2 : 1);
  }
  if (data === null && event === undefined) return null;
  const parsed: SseEvent = { event, data: data ?? '' };
  if (id !== undefined) parsed.id = id;
  if (retry !== undefined) parsed.retry = retry;
  return parsed;
}

/** One event written out: its name, id and retry fields, then its data line by line. */
export function formatSseEvent(event: SseEvent): Uint8Array {
  let text = '';
  if (event.event !== undefined) text += `event: ${event.event}\n`;
  if (event.id !== undefined) text += `id: ${event.id}\n`;
  if (event.retry !== undefined) text += `retry: ${event.retry}\n`;
  for (const line of event.data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  return encodeText(text + '\n');
}

export function sseErrorFrame(eventName: string | undefined, payload: unknown): Uint8Array {
  return formatSseEvent({ event: eventName, data: JSON.stringify(payload) });
}

/** The one SSE splitter: every provider's stream meter and the MCP answer filter frame with it. */
export function createSseFramer(
  visit: EventVisitor,
  maxEventBytes = DEFAULT_MAX_EVENT_BYTES,
  unread?: UnreadVisitor,
): Framer {
  return new SseFramer(visit, maxEventBytes, unread);
}

// One object with fields, not a set of closures: a stream's framer lives as long as the stream.
class SseFramer implements Framer {
  readonly #visit: EventVisitor;
  readonly #unread: UnreadVisitor | undefined;
  readonly #held: HeldBytes;
  // Line-ending state survives chunk boundaries, so a CRLF split across two chunks counts once.
  #atLineStart = true;
  #previousCr = false;
  #closed = false;

  constructor(visit: EventVisitor, maxEventBytes: number, unread: UnreadVisitor | undefined) {
    this.#visit = visit;
    this.#unread = unread;
    this.#held = new HeldBytes(maxEventBytes);
  }

  get closed(): boolean {
    return this.#closed;
  }

  *push(chunk: Uint8Array): Generator<Uint8Array, void, undefined> {
    let eventStart = 0;
    // Where the next CR is (-1: none left in the chunk); CRs are rare, so it is searched for
    // again only once passed.
    let nextCr = chunk.indexOf(CR);
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b === LF && this.#previousCr) {
        this.#previousCr = false;
        continue;
      }
      if (b !== LF && b !== CR) {
        this.#previousCr = false;
        this.#atLineStart = false;
        // The rest of the line holds no line ending: jump to the byte before the next one.
        if (nextCr !== -1 && nextCr < i) nextCr = chunk.indexOf(CR, i);
        const nextLf = chunk.indexOf(LF, i);
        const next = nextLf === -1 ? nextCr : nextCr === -1 ? nextLf : Math.min(nextLf, nextCr);
        i = (next === -1 ? chunk.length : next) - 1;
        continue;
      }
      this.#previousCr = b === CR;
      if (!this.#atLineStart) {
        this.#atLineStart = true;
        continue;
      }
      let end = i + 1;
      if (b === CR && chunk[end] === LF) {
        end++;
        i++;
        this.#previousCr = false;
      }
      const frame = this.#held.take(chunk.subarray(eventStart, end));
      eventStart = end;
      yield this.#release(frame);
    }
    this.#held.hold(chunk.subarray(eventStart));
  }

  end(): Uint8Array {
    this.#closed = true;
    const rest = this.#held.take(EMPTY);
    return rest.length === 0 ? EMPTY : this.#release(rest);
  }

  errorFrame(eventName: string | undefined, payload: unknown): Uint8Array {
    return sseErrorFrame(eventName, payload);
  }

  #release(frame: Uint8Array): Uint8Array {
    const text = decodeFrame(frame);
    const parsed = parseSseEvent(text);
    if (parsed === null) {
      this.#unread?.(text);
      return frame;
    }
    const verdict = this.#visit(parsed);
    return verdict === true ? frame : verdict === false ? EMPTY : verdict;
  }
}
