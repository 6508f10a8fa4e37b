import { concatBytes, EMPTY, encodeText, type EventVisitor, type Framer } from './sse-framer.ts';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * Frames a streamed JSON array of objects (Gemini's `streamGenerateContent` without `alt=sse`):
 * each top-level element is visited as one event's data once its closing brace arrives.
 */
export function createJsonArrayFramer(visit: EventVisitor): Framer {
  const decoder = new TextDecoder();
  let pending: Uint8Array = EMPTY;
  let depth = 0;
  let inString = false;
  let escaped = false;
  let opened = false;
  let elements = 0;
  let closed = false;
  let elementStart = 0;

  return {
    get closed() {
      return closed;
    },
    push(chunk) {
      const buf = concatBytes(pending, chunk);
      let cut = 0;
      for (let i = pending.length; i < buf.length; i++) {
        const b = buf[i];
        if (inString) {
          if (escaped) escaped = false;
          else if (b === BACKSLASH) escaped = true;
          else if (b === QUOTE) inString = false;
          continue;
        }
        if (b === QUOTE) {
          inString = true;
        } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
          if (depth === 0 && b === OPEN_BRACKET) {
            opened = true;
            cut = i + 1;
          } else if (depth === 1) {
            elementStart = i;
          }
          depth++;
        } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
          depth--;
          if (depth === 1) {
            elements++;
            visit({ event: undefined, data: decoder.decode(buf.subarray(elementStart, i + 1)) });
            cut = i + 1;
          } else if (depth === 0) {
            closed = true;
            cut = buf.length;
            break;
          }
        }
      }
      // Offsets into the held bytes move with them.
      elementStart -= cut;
      pending = cut < buf.length ? buf.slice(cut) : EMPTY;
      return cut === buf.length ? buf : buf.subarray(0, cut);
    },
    end() {
      closed = true;
      const rest = pending;
      pending = EMPTY;
      return rest;
    },
    errorFrame(_eventName, payload) {
      if (closed) return EMPTY;
      const json = JSON.stringify(payload);
      if (!opened) return encodeText(`[${json}]`);
      return encodeText(`${elements > 0 ? ',\r\n' : ''}${json}]`);
    },
  };
}
