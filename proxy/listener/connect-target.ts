import { SvcError } from '../../core/errors/index.ts';

export interface ConnectTarget {
  /** Host name or IP literal, IPv6 without brackets. */
  host: string;
  port: number;
}

/**
 * A host name as the proxy decides on it: lower case (as a URL writes it) without the trailing
 * dot of a fully qualified name. `api.openai.com.` is `api.openai.com` to DNS and to a client's
 * certificate check, so no spelling may take a provider's host around interception, provider
 * matching, upstream overrides or egress rules.
 */
export function canonicalHostname(hostname: string): string {
  return hostname.toLowerCase().replace(/\.+$/, '');
}

/** Parses a CONNECT request target (`host:port`, `[::1]:443`), its host in canonical form. */
export function parseConnectTarget(authority: string | undefined): ConnectTarget {
  // https: so that an omitted or default port reads as 443, the CONNECT default.
  const url = URL.parse(`https://${authority ?? ''}`);
  const hostname = canonicalHostname(url?.hostname ?? '');
  if (url === null || hostname === '' || url.pathname !== '/' || url.username !== '' || url.search !== '') {
    throw new SvcError('SVC-SYS-9002', `invalid CONNECT target: ${authority ?? '(none)'}`, { fields: 'authority' }, [
      { field: 'authority', description: 'must be host:port' },
    ]);
  }
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return { host, port: url.port === '' ? 443 : Number(url.port) };
}

/** The origin a request inside an intercepted CONNECT was meant for: https, or http when sent in the clear. */
export function interceptedOrigin({ host, port }: ConnectTarget, tls = true): string {
  const hostPart = host.includes(':') ? `[${host}]` : host;
  const scheme = tls ? 'https' : 'http';
  return port === (tls ? 443 : 80) ? `${scheme}://${hostPart}` : `${scheme}://${hostPart}:${port}`;
}
