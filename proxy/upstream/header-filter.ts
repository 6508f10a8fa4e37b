import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** RFC 9110 §7.6.1 connection-specific fields, plus the proxy-only ones, never relayed. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Fields the client sends that the upstream connection sets for itself. */
const REQUEST_ONLY = new Set(['host', 'expect', 'content-length']);

type HeaderValue = string | string[] | number | undefined;

const NONE: readonly string[] = [];

/**
 * The field names a Connection header lists, lower case. Nearly every one lists a single token
 * (`keep-alive`, `close`): that is read without splitting, as this runs for every request and
 * every answer.
 */
function connectionTokens(value: HeaderValue): readonly string[] {
  if (value === undefined) return NONE;
  const joined = Array.isArray(value) ? value.join(',') : String(value);
  if (!joined.includes(',')) {
    const token = joined.trim().toLowerCase();
    return token.length > 0 ? [token] : NONE;
  }
  return joined
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t.length > 0);
}

function filter(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
  drop: (name: string) => boolean,
): Record<string, string | string[]> {
  const named = connectionTokens(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const rawName of Object.keys(headers)) {
    const value = headers[rawName];
    if (value === undefined) continue;
    const name = rawName.toLowerCase();
    if (HOP_BY_HOP.has(name) || named.includes(name) || drop(name)) continue;
    out[name] = typeof value === 'number' ? String(value) : value;
  }
  return out;
}

const dropSvcAndRequestOnly = (name: string) => name.startsWith('x-svc-') || REQUEST_ONLY.has(name);
const dropSvcAndHostFields = (name: string) =>
  name.startsWith('x-svc-') || (REQUEST_ONLY.has(name) && name !== 'content-length');
const dropNone = () => false;

/**
 * Headers to send upstream: hop-by-hop fields and every `x-svc-*` governance field removed.
 * Content-Length is dropped only when the body is re-streamed (`keepContentLength` false),
 * since the upstream client then frames it itself.
 */
export function upstreamRequestHeaders(
  headers: IncomingHttpHeaders,
  keepContentLength = true,
): Record<string, string | string[]> {
  return filter(headers, keepContentLength ? dropSvcAndHostFields : dropSvcAndRequestOnly);
}

/** Headers to relay back to the client: hop-by-hop fields removed. */
export function clientResponseHeaders(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
): Record<string, string | string[]> {
  return filter(headers, dropNone);
}
