import {
  decodeFrame,
  DEFAULT_MAX_EVENT_BYTES,
  EMPTY,
  encodeText,
  HeldBytes,
  type EventVisitor,
  type Framer,
} from './sse-framer.ts';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * Frames a streamed JSON array of objects (Gemini's `streamGenerateContent` without `alt=sse`):
 * each top-level element is visited as one event's data once its closing brace arrives, and
 * yielded with the separators before it. Elements are metered, never hidden or rewritten: the
 * visitor's verdict is not used. Bounded like the SSE framer.
 */
export function createJsonArrayFramer(visit: EventVisitor, maxEventBytes = DEFAULT_MAX_EVENT_BYTES): Framer {
  const held = new HeldBytes(maxEventBytes);
  let depth = 0;
  let inString = false;
  let escaped = false;
  let opened = false;
  let elements = 0;
  let closed = false;
  /** Where the current element starts, counted from the first unreleased byte. */
  let elementStart = 0;
  /** What the client has been given, for an error frame that keeps the array valid. */
  const shown = { opened: false, elements: 0, closed: false };

  return {
    get closed() {
      return closed;
    },
    *push(chunk) {
      if (closed) {
        if (chunk.length > 0) yield chunk;
        return;
      }
      let cut = 0;
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i];
        if (inString) {
          if (escaped) escaped = false;
          else if (b === BACKSLASH) escaped = true;
          else if (b === QUOTE) inString = false;
          continue;
        }
        if (b === QUOTE) {
          inString = true;
        } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
          if (depth === 0 && b === OPEN_BRACKET) opened = true;
          else if (depth === 1) elementStart = held.length + (i - cut);
          depth++;
        } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
          depth--;
          if (depth === 1) {
            elements++;
            const frame = held.take(chunk.subarray(cut, i + 1));
            cut = i + 1;
            visit({ event: undefined, data: decodeFrame(frame.subarray(elementStart)) });
            yield frame;
            Object.assign(shown, { opened, elements });
          } else if (depth === 0) {
            closed = true;
            const frame = held.take(chunk.subarray(cut));
            yield frame;
            Object.assign(shown, { opened, elements, closed });
            return;
          }
        }
      }
      held.hold(chunk.subarray(cut));
    },
    end() {
      closed = true;
      return held.take(EMPTY);
    },
    errorFrame(_eventName, payload) {
      if (shown.closed) return EMPTY;
      const json = JSON.stringify(payload);
      if (!shown.opened) return encodeText(`[${json}]`);
      return encodeText(`${shown.elements > 0 ? ',\r\n' : ''}${json}]`);
    },
  };
}

/**
 * Frames an answer that is one JSON document where a stream was asked for (a server that ignored
 * the stream flag): the whole document is one event, visited and released when the answer ends,
 * so what it carries (tool calls, usage) is read before any of it reaches the client. Bounded
 * like the other framers.
 */
export function createJsonDocumentFramer(visit: EventVisitor, maxEventBytes = DEFAULT_MAX_EVENT_BYTES): Framer {
  const held = new HeldBytes(maxEventBytes);
  let closed = false;
  return {
    get closed() {
      return closed;
    },
    *push(chunk) {
      held.hold(chunk);
      // Nothing is released before the document ends.
      yield* [];
    },
    end() {
      closed = true;
      const document = held.take(EMPTY);
      visit({ event: undefined, data: decodeFrame(document) });
      return document;
    },
    errorFrame(_eventName, payload) {
      // Nothing of the document was released: the error is the whole answer.
      return encodeText(JSON.stringify(payload));
    },
  };
}
