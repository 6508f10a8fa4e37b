import { makeWellFormed } from '../domain/json-values.ts';
import { SvcError } from '../errors/index.ts';

const encoder = new TextEncoder();

/**
 * Payloads travel as JSON on every implementation, so the in-process bus hands a subscriber the
 * same shapes NATS would (a Date becomes a string) and a payload JSON cannot carry fails early.
 * `json`, where given, is that text already made (`JSON.stringify(data)`), and is not made again.
 */
export function encodePayload(data: unknown, maxBytes = Number.POSITIVE_INFINITY, json?: string): Uint8Array {
  let text: string | undefined = json;
  try {
    text ??= JSON.stringify(data);
  } catch (error) {
    throw new SvcError(
      'SVC-EVT-4002',
      `payload is not JSON-serialisable: ${(error as Error).message}`,
      { field: 'data' },
      [{ field: 'data', description: 'must be JSON-serialisable' }],
    );
  }
  if (text === undefined) {
    throw new SvcError('SVC-EVT-4002', 'payload is not JSON-serialisable', { field: 'data' }, [
      { field: 'data', description: 'must be JSON-serialisable' },
    ]);
  }
  const bytes = encoder.encode(text);
  // Too large is terminal: retrying the same payload can never succeed.
  if (bytes.length > maxBytes) {
    throw new SvcError(
      'SVC-SYS-9009',
      `payload of ${bytes.length} bytes exceeds the ${maxBytes}-byte message limit`,
      { field: 'data', bytes: bytes.length, max_bytes: maxBytes },
      [{ field: 'data', description: `must encode to at most ${maxBytes} bytes` }],
    );
  }
  return bytes;
}

/** A JSON escape of a UTF-16 surrogate: the only way a decoded payload can hold an unpaired one. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * The bytes as UTF-8 text, as `TextDecoder` reads them (malformed sequences become U+FFFD, a leading
 * byte order mark is dropped). Buffer's decoding gives the same text in less time, and
 * `JSON.parse` reads its string no slower: 0.2 to 0.6 µs less per usage event, a tenth of its decoding.
 */
function utf8Text(bytes: Uint8Array): string {
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const bom = buffer.length >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf;
  return buffer.toString('utf8', bom ? 3 : 0);
}

/**
 * The payload's value. Its text is read as Unicode: malformed UTF-8 becomes U+FFFD, and so does an
 * escaped unpaired surrogate, so that every string a consumer sees is one storage keeps as it is.
 */
export function decodePayload(bytes: Uint8Array): unknown {
  if (bytes.length === 0) return undefined;
  const text = utf8Text(bytes);
  const value = JSON.parse(text) as unknown;
  return SURROGATE_ESCAPE.test(text) ? makeWellFormed(value) : value;
}
