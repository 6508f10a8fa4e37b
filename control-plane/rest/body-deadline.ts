import type { IncomingMessage } from 'node:http';

/** Transport level, as Node's own refusal of headers that come too slowly: no SVC body. */
const TIMED_OUT = 'HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';

/**
 * Closes the connection of a request whose body has not all arrived `ms` after its headers, with
 * a bare 408 first. Node's `requestTimeout` stops watching a request once it is handed on with
 * its headers, so a body sent a byte at a time would otherwise hold its connection and buffer
 * for as long as the client likes, and the rate limit, which counts requests once read, never
 * sees it.
 */
export function bodyDeadline(raw: IncomingMessage, ms: number): void {
  const declared = raw.headers['content-length'];
  const body = raw.headers['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
  if (!body || raw.complete) return;
  const timer = setTimeout(() => {
    if (!raw.complete) raw.socket.end(TIMED_OUT);
  }, ms).unref();
  const done = () => clearTimeout(timer);
  raw.once('end', done);
  raw.once('close', done);
}
