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

function ipv4Internal(host: string): boolean | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return undefined;
  const [a, b] = [Number(m[1]), Number(m[2])];
  return a === 10 || a === 127 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || a === 0;
}

function matchesPattern(host: string, pattern: string): boolean {
  const p = pattern.toLowerCase();
  if (p.startsWith('*.')) return host.endsWith(p.slice(1)) || host === p.slice(2);
  return host === p;
}

/** Classifies a host (lower case, no port) or a `host/path` for the path-scoped drop sites. */
export function classifyDestination(hostAndPath: string, policy: HostPolicy): Destination {
  const host = (hostAndPath.split('/')[0] as string).replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  if (DROP_SITES.some((d) => (d.includes('/') ? hostAndPath.startsWith(d) : host === d || host.endsWith(`.${d}`))))
    return 'drop';
  if (policy.allowed.some((p) => matchesPattern(host, p))) return 'allowed';
  if (host === 'localhost' || host === '::1' || (host.includes(':') && /^f[cd]/.test(host))) return 'internal';
  const ip = ipv4Internal(host);
  if (ip !== undefined) return ip ? 'internal' : 'external';
  if (!host.includes('.')) return 'internal';
  if (INTERNAL_SUFFIXES.some((s) => host.endsWith(s))) return 'internal';
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
    const host = (authority.slice(authority.lastIndexOf('@') + 1).split(':')[0] as string).replace(/\.$/, '');
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
