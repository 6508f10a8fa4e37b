import { SvcError } from '../../core/errors/index.ts';

/** Host (lower case) of a real upstream → the base URL that serves it instead. */
export type UpstreamOverrides = ReadonlyMap<string, URL>;

/**
 * Parses `api.openai.com=https://127.0.0.1:9443,api.anthropic.com=http://sim:8080` (the
 * SVC_UPSTREAM_OVERRIDES setting). An empty string means no overrides.
 */
export function parseUpstreamOverrides(value: string, key = 'upstream_overrides'): UpstreamOverrides {
  const overrides = new Map<string, URL>();
  for (const entry of value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e.length > 0)) {
    const at = entry.indexOf('=');
    const host = at > 0 ? entry.slice(0, at).trim().toLowerCase() : '';
    const target = URL.parse(at > 0 ? entry.slice(at + 1).trim() : '');
    if (host === '' || target === null || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
      const description = `entry "${entry}" must be host=http(s)://target`;
      throw new SvcError('SVC-SYS-9002', `invalid ${key}: ${description}`, { fields: key }, [
        { field: key, description },
      ]);
    }
    overrides.set(host, target);
  }
  return overrides;
}

/** Where a request for `url` actually goes: the override's origin and base path, else `url` itself. */
export function applyOverride(url: URL, overrides: UpstreamOverrides): URL {
  const target = overrides.get(url.hostname.toLowerCase());
  if (target === undefined) return url;
  const basePath = target.pathname.endsWith('/') ? target.pathname.slice(0, -1) : target.pathname;
  // Concatenated, not resolved, so that a path starting `//` cannot name another host.
  return new URL(`${target.origin}${basePath}${url.pathname}${url.search}`);
}
