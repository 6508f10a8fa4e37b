import { SvcError } from '../../core/errors/index.ts';
import { canonicalHostname } from './connect-target.ts';

export interface InterceptList {
  /** Whether a CONNECT to `host:port` is decrypted and governed. */
  (host: string, port: number): boolean;
  /** Whether a pattern names `host` on any port: its other ports are refused, never tunnelled blind. */
  names(host: string): boolean;
}

/**
 * Compiles intercept patterns, grouped by the config key they come from (for errors): `host`
 * and `*.domain` mean port 443, `host:port`, `[v6]:port` and `*.domain:port` that port only.
 * So an MCP server at `http://tools.internal:7000` is intercepted on 7000; another port of the
 * same host is no tunnel either (`names`), since its traffic could be the governed server's.
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
  const hosts = new Set([...exact].map((hostPort) => hostPort.slice(0, hostPort.lastIndexOf(':'))));
  const intercepted = (host: string, port: number) => {
    const h = host.toLowerCase();
    if (exact.has(`${h}:${port}`)) return true;
    return suffixes.some((s) => s.port === port && h.endsWith(s.suffix));
  };
  return Object.assign(intercepted, {
    names(host: string) {
      const h = host.toLowerCase();
      return hosts.has(h) || suffixes.some((s) => h.endsWith(s.suffix));
    },
  });
}
