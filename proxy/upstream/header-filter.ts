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

function connectionTokens(value: HeaderValue): Set<string> | undefined {
  if (value === undefined) return undefined;
  const joined = Array.isArray(value) ? value.join(',') : String(value);
  const tokens = joined
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t.length > 0);
  return tokens.length > 0 ? new Set(tokens) : undefined;
}

function filter(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
  drop: (name: string) => boolean,
): Record<string, string | string[]> {
  const named = connectionTokens(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const [rawName, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const name = rawName.toLowerCase();
    if (HOP_BY_HOP.has(name) || named?.has(name) === true || drop(name)) continue;
    out[name] = typeof value === 'number' ? String(value) : value;
  }
  return out;
}

/**
 * Headers to send upstream: hop-by-hop fields and every `x-svc-*` governance field removed.
 * Content-Length is dropped only when the body is re-streamed (`keepContentLength` false),
 * since the upstream client then frames it itself.
 */
export function upstreamRequestHeaders(
  headers: IncomingHttpHeaders,
  keepContentLength = true,
): Record<string, string | string[]> {
  return filter(
    headers,
    (name) =>
      name.startsWith('x-svc-') || (REQUEST_ONLY.has(name) && !(keepContentLength && name === 'content-length')),
  );
}

/** Headers to relay back to the client: hop-by-hop fields removed. */
export function clientResponseHeaders(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
): Record<string, string | string[]> {
  return filter(headers, () => false);
}
