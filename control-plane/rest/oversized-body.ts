import type { IncomingMessage } from 'node:http';

/**
 * Whether the request declares a body over the limit; one without a declared length meets the
 * body parser's own bound. Such a body is read to its end first, within the bounds of
 * `drainOversizedBody` (Node's parser holds it to its declared length), so the 413 reaches a
 * client still sending it: the body parser would close the connection at once.
 */
export function declaredOverLimit(raw: IncomingMessage, limitBytes: number): boolean {
  return Number(raw.headers['content-length']) > limitBytes;
}
