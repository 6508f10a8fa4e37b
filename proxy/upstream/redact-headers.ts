import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

const CREDENTIAL_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'cookie',
  'set-cookie',
]);

/** A copy of `headers` safe to log: credential values replaced, everything else kept. */
export function redactHeaders(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders | Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(headers)) {
    out[name] = CREDENTIAL_HEADERS.has(name.toLowerCase()) && value !== undefined ? '[redacted]' : value;
  }
  return out;
}
