import { randomUUID } from 'node:crypto';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The caller's `x-request-id` (HTTP header or gRPC metadata) when it is a sensible correlation
 * id, else a new one: the id is echoed in headers, bodies and every log line, so an arbitrary
 * value must not pass through.
 */
export function requestIdOf(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && REQUEST_ID.test(value) ? value : randomUUID();
}
