/** One server-sent event as the client would see it. */
export interface SseEvent {
  event: string | undefined;
  data: string;
}

/** Decides per complete event whether it reaches the client (`false` hides it). */
export type EventVisitor = (event: SseEvent) => boolean;

/**
 * Splits a byte stream into complete frames as chunks arrive (a chunk may end anywhere, even
 * inside a UTF-8 character), and says which bytes may go on to the client: only whole frames,
 * so a stream can be cut between two frames and an error frame appended cleanly. It holds at
 * most the current incomplete frame.
 */
export interface Framer {
  push(chunk: Uint8Array): Uint8Array;
  /** Upstream ended: the last frame, even if unterminated, is visited and released. */
  end(): Uint8Array;
  /** Bytes that end the stream with `payload` as an error frame in this framing. */
  errorFrame(eventName: string | undefined, payload: unknown): Uint8Array;
  readonly closed: boolean;
}

export const EMPTY = new Uint8Array(0);
const LF = 0x0a;
const CR = 0x0d;
const encoder = new TextEncoder();

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

function parseSseEvent(text: string): SseEvent | null {
  let event: string | undefined;
  let data: string | null = null;
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data = data === null ? value : data + '\n' + value;
  }
  return data === null && event === undefined ? null : { event, data: data ?? '' };
}

export function sseErrorFrame(eventName: string | undefined, payload: unknown): Uint8Array {
  return encodeText(`${eventName === undefined ? '' : `event: ${eventName}\n`}data: ${JSON.stringify(payload)}\n\n`);
}

export function createSseFramer(visit: EventVisitor): Framer {
  const decoder = new TextDecoder();
  let pending: Uint8Array = EMPTY;
  // Line-ending state survives chunk boundaries, so a CRLF split across two chunks counts once.
  let atLineStart = true;
  let previousCr = false;
  let closed = false;

  function emit(buf: Uint8Array, start: number, end: number): boolean {
    const parsed = parseSseEvent(decoder.decode(buf.subarray(start, end)));
    return parsed === null ? true : visit(parsed);
  }

  return {
    get closed() {
      return closed;
    },
    push(chunk) {
      const buf = concatBytes(pending, chunk);
      let eventStart = 0;
      let kept: Uint8Array[] | null = null;
      for (let i = pending.length; i < buf.length; i++) {
        const b = buf[i];
        if (b === LF && previousCr) {
          previousCr = false;
          continue;
        }
        if (b !== LF && b !== CR) {
          previousCr = false;
          atLineStart = false;
          continue;
        }
        previousCr = b === CR;
        if (!atLineStart) {
          atLineStart = true;
          continue;
        }
        let end = i + 1;
        if (b === CR && buf[end] === LF) {
          end++;
          i++;
          previousCr = false;
        }
        if (!emit(buf, eventStart, end)) kept ??= eventStart > 0 ? [buf.subarray(0, eventStart)] : [];
        else if (kept) kept.push(buf.subarray(eventStart, end));
        eventStart = end;
      }
      pending = eventStart < buf.length ? buf.slice(eventStart) : EMPTY;
      if (kept === null) return eventStart === buf.length ? buf : buf.subarray(0, eventStart);
      return kept.reduce(concatBytes, EMPTY);
    },
    end() {
      closed = true;
      const rest = pending;
      pending = EMPTY;
      if (rest.length === 0) return EMPTY;
      return emit(rest, 0, rest.length) ? rest : EMPTY;
    },
    errorFrame: sseErrorFrame,
  };
}
