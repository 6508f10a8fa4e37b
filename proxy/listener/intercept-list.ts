import { SvcError } from '../../core/errors/index.ts';
import { canonicalHostname } from './connect-target.ts';

/** Whether a CONNECT to `host:port` is decrypted and governed. */
export type InterceptList = (host: string, port: number) => boolean;

/**
 * Compiles intercept patterns, grouped by the config key they come from (for errors): `host`
 * and `*.domain` mean port 443, `host:port`, `[v6]:port` and `*.domain:port` that port only.
 * So an MCP server at `http://tools.internal:7000` is intercepted on 7000, and a tunnel to
 * another port of the same host stays blind.
 */
export function compileInterceptList(sources: Readonly<Record<string, readonly string[]>>): InterceptList {
  const exact = new Set<string>();
  const suffixes: { suffix: string; port: number }[] = [];
  for (const [key, patterns] of Object.entries(sources)) {
    for (const raw of patterns) {
      const wildcard = raw.startsWith('*.');
      const url = URL.parse(`https://${wildcard ? raw.slice(2) : raw}`);
      if (url === null || url.hostname === '' || url.pathname !== '/' || url.username !== '' || url.search !== '') {
        const description = `"${raw}" must be host, host:port, *.domain or *.domain:port`;
        throw new SvcError('SVC-SYS-9002', `invalid ${key}: ${description}`, { fields: key }, [
          { field: key, description },
        ]);
      }
      // Matched against canonical targets (connect-target.ts), so written the same way.
      const hostname = canonicalHostname(url.hostname);
      const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
      const port = url.port === '' ? 443 : Number(url.port);
      if (wildcard) suffixes.push({ suffix: `.${host}`, port });
      else exact.add(`${host}:${port}`);
    }
  }
  return (host, port) => {
    const h = host.toLowerCase();
    if (exact.has(`${h}:${port}`)) return true;
    return suffixes.some((s) => s.port === port && h.endsWith(s.suffix));
  };
}
