import { isIP } from 'node:net';

/**
 * Where data goes. A destination is `internal` (loopback, private addresses, cluster and
 * intranet names), `allowed` (on the operator's list), a `drop` site (paste bins, request
 * catchers, tunnels, chat webhooks: places made for getting data out), or `external`.
 */
export type Destination = 'internal' | 'allowed' | 'drop' | 'external';

const DROP_SITES = [
  'pastebin.com',
  'paste.ee',
  'hastebin.com',
  'hastebin.skyra.pw',
  'ghostbin.com',
  'dpaste.com',
  'dpaste.org',
  'controlc.com',
  'rentry.co',
  'ix.io',
  'sprunge.us',
  'termbin.com',
  '0x0.st',
  'transfer.sh',
  'file.io',
  'tmpfiles.org',
  'gofile.io',
  'anonfiles.com',
  'catbox.moe',
  'bashupload.com',
  'webhook.site',
  'requestbin.com',
  'requestbin.net',
  'pipedream.net',
  'beeceptor.com',
  'hookbin.com',
  'ngrok.io',
  'ngrok-free.app',
  'ngrok.app',
  'trycloudflare.com',
  'loca.lt',
  'serveo.net',
  'burpcollaborator.net',
  'oastify.com',
  'interact.sh',
  'oast.fun',
  'oast.pro',
  'oast.live',
  'canarytokens.com',
  'dnslog.cn',
  'ceye.io',
  'requestcatcher.com',
  'discord.com/api/webhooks',
  'discordapp.com/api/webhooks',
  'api.telegram.org',
  'hooks.slack.com',
];

/** Names that only resolve inside a network: single labels and the private suffixes. */
const INTERNAL_SUFFIXES = [
  '.internal',
  '.local',
  '.localdomain',
  '.lan',
  '.corp',
  '.intranet',
  '.svc',
  '.cluster.local',
];

export interface HostPolicy {
  /** Host patterns from configuration: `github.com`, `*.corp.example`. */
  readonly allowed: readonly string[];
}

/** Loopback, private, link-local and "this network" IPv4 addresses. */
function ipv4Internal([a = 0, b = 0]: readonly number[]): boolean {
  return (
    a === 10 ||
    a === 127 ||
    a === 0 ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 169 && b === 254)
  );
}

/** Loopback, unspecified, unique-local (fc00::/7), link-local (fe80::/10), and IPv4-mapped internal addresses. */
function ipv6Internal(address: string): boolean {
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  const g = [...left, ...zeros, ...right].map((group) => Number.parseInt(group, 16));
  const [first = 0] = g;
  if (g.slice(0, 7).every((x) => x === 0) && (g[7] === 0 || g[7] === 1)) return true;
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff)
    return ipv4Internal([(g[6] ?? 0) >> 8, (g[6] ?? 0) & 0xff]);
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80;
}

/** The host as a URL parser reaches it (`134744072` and `0x08080808` are `8.8.8.8`), or undefined when none would. */
export function reachedHost(host: string): string | undefined {
  try {
    return new URL(`http://${host}/`).hostname;
  } catch {
    return undefined;
  }
}

function matchesPattern(host: string, pattern: string): boolean {
  const p = pattern.toLowerCase();
  if (p.startsWith('*.')) return host.endsWith(p.slice(1)) || host === p.slice(2);
  return host === p;
}

/** Classifies a host (lower case, no port) or a `host/path` for the path-scoped drop sites. */
export function classifyDestination(hostAndPath: string, policy: HostPolicy): Destination {
  const written = (hostAndPath.split('/')[0] as string).replace(/:\d+$/, '');
  const reached = reachedHost(written);
  const host = reached ?? written;
  if (DROP_SITES.some((d) => (d.includes('/') ? hostAndPath.startsWith(d) : host === d || host.endsWith(`.${d}`))))
    return 'drop';
  if (policy.allowed.some((p) => matchesPattern(host, p) || matchesPattern(written, p))) return 'allowed';
  // A host no URL parser accepts is not known to be ours.
  if (reached === undefined) return 'external';
  // An address is classed by its range; a name without a dot only resolves inside a network.
  const address = reached.replace(/^\[|\]$/g, '');
  const version = isIP(address);
  if (version === 4) return ipv4Internal(address.split('.').map(Number)) ? 'internal' : 'external';
  if (version === 6) return ipv6Internal(address) ? 'internal' : 'external';
  if (!host.includes('.') || INTERNAL_SUFFIXES.some((s) => host.endsWith(s))) return 'internal';
  return 'external';
}

const URL_PATTERN = /(?:https?|ftps?|wss?):\/\/([^\s/'"`<>?#)]+)([^\s'"`<>?#)]*)/gi;

/** Every URL in a text: its host (lower case, no credentials or port), `host/path`, and where it starts. */
export function urlsIn(text: string): { host: string; hostAndPath: string; index: number; length: number }[] {
  const out: { host: string; hostAndPath: string; index: number; length: number }[] = [];
  URL_PATTERN.lastIndex = 0;
  // A plain JS regex is safe here: no nesting or alternation can backtrack beyond the one pass.
  for (let m = URL_PATTERN.exec(text); m !== null && out.length < 20; m = URL_PATTERN.exec(text)) {
    const authority = (m[1] as string).toLowerCase();
    const hostAndPort = authority.slice(authority.lastIndexOf('@') + 1);
    // An IPv6 address is bracketed and holds colons of its own.
    const host = (
      hostAndPort.startsWith('[')
        ? hostAndPort.slice(0, hostAndPort.indexOf(']') + 1)
        : (hostAndPort.split(':')[0] as string)
    ).replace(/\.$/, '');
    out.push({ host, hostAndPath: host + (m[2] ?? '').toLowerCase(), index: m.index, length: m[0].length });
  }
  return out;
}

/** The host of an scp/rsync remote (`user@host:path`, `host::module`), or undefined for a local path. */
export function remoteHost(spec: string): string | undefined {
  if (/^[a-z]:[\\/]/i.test(spec) || spec.startsWith('/') || spec.startsWith('.')) return undefined;
  const m = /^(?:[^@\s/:]+@)?([a-z0-9.-]+|\[[0-9a-f:]+\]):/i.exec(spec);
  return m ? (m[1] as string).toLowerCase() : undefined;
}
