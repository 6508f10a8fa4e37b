import { parseNameUrlList } from './name-url-list.ts';

/** Host (lower case) of a real upstream → the base URL that serves it instead. */
export type UpstreamOverrides = ReadonlyMap<string, URL>;

/** A host name or IP literal as `URL.hostname` gives it; overrides match on that alone. */
const HOST = /^([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\])$/;

/**
 * Parses `api.openai.com=https://127.0.0.1:9443,api.anthropic.com=http://sim:8080` (the
 * SVC_UPSTREAM_OVERRIDES setting). An empty string means no overrides.
 */
export function parseUpstreamOverrides(value: string, key = 'upstream_overrides'): UpstreamOverrides {
  return new Map(
    parseNameUrlList(value, key, { label: 'host', pattern: HOST }).map((e) => [e.name.toLowerCase(), e.url]),
  );
}

/** Where a request is sent: the origin dialled and the path (with its query) asked of it. */
export interface UpstreamTarget {
  origin: string;
  path: string;
  /** Sent to an operator-configured destination instead of the URL's own host. */
  overridden: boolean;
}

/**
 * Where a request for `url` actually goes: the override's origin and base path, else `url`'s
 * own. The path is the override's base path and `url`'s path joined as text: both are a parsed
 * URL's (encoded, without dot segments), so joined they need no parsing again, and a path starting
 * `//` cannot name another host.
 */
export function upstreamTarget(url: URL, overrides: UpstreamOverrides): UpstreamTarget {
  const target = overrides.get(url.hostname.toLowerCase());
  if (target === undefined) return { origin: url.origin, path: `${url.pathname}${url.search}`, overridden: false };
  const basePath = target.pathname.endsWith('/') ? target.pathname.slice(0, -1) : target.pathname;
  return { origin: target.origin, path: `${basePath}${url.pathname}${url.search}`, overridden: true };
}
