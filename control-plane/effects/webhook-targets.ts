import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { SvcError } from '../../core/errors/index.ts';

/**
 * Addresses a webhook may never reach unless allow-listed: this host, private networks, link-local
 * (cloud metadata at 169.254.169.254 and fd00:ec2::254), and ranges that are not unicast on the
 * internet. IPv4-mapped IPv6 addresses are checked against the IPv4 rules (BlockList does so).
 */
const DENIED: ReadonlyArray<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 3, 'ipv4'],
  ['::1', 128, 'ipv6'],
  // IPv4-compatible (deprecated) and IPv4-translated addresses, NAT64 and 6to4 embed IPv4
  // addresses, private ones included.
  ['::', 96, 'ipv6'],
  ['::ffff:0:0:0', 96, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
  ['64:ff9b:1::', 48, 'ipv6'],
  ['2002::', 16, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
];

export interface WebhookTargetOptions {
  /** Plain-HTTP webhook URLs are refused unless this is set (`webhook_allow_http`). */
  allowHttp: boolean;
  /**
   * `webhook_allowed_hosts`: comma-separated host names (`hooks.internal`, `*.corp.example`) that
   * may resolve to denied addresses, and addresses or CIDRs (`10.20.0.0/16`, `fd12::/64`) that
   * may be reached.
   */
  allowedHosts: string;
  /** Name resolution; the system resolver when absent. */
  resolve?: LookupFunction;
}

/** A webhook URL a caller may not set, or the delivery may not make: why, for people. */
export class WebhookTargetRefused extends Error {
  override readonly name = 'WebhookTargetRefused';
}

/**
 * Where alert webhooks may go. Checked twice: when a URL is stored (its form, and an address
 * written into it) and when a delivery connects (every address the name resolves to, at that
 * moment); the connection is made to the very address that was checked, so a name that resolves
 * differently the second time (DNS rebinding) gains nothing.
 */
export class WebhookTargets {
  readonly #allowHttp: boolean;
  readonly #denied = new BlockList();
  readonly #allowed = new BlockList();
  readonly #allowedNames: string[] = [];
  readonly #resolve: LookupFunction;

  constructor(options: WebhookTargetOptions) {
    this.#allowHttp = options.allowHttp;
    this.#resolve = options.resolve ?? dnsLookup;
    for (const [address, prefix, family] of DENIED) this.#denied.addSubnet(address, prefix, family);
    for (const entry of options.allowedHosts.split(',').map((e) => e.trim().toLowerCase())) {
      if (entry === '') continue;
      const [address = '', bits] = entry.split('/');
      const family = isIP(address);
      if (family === 0) {
        if (bits !== undefined || !/^(\*\.)?[a-z0-9.-]+$/.test(entry))
          throw invalidEntry(entry, 'neither a host name nor an address or CIDR');
        this.#allowedNames.push(entry);
      } else {
        const prefix = bits === undefined ? (family === 4 ? 32 : 128) : Number(bits);
        if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128))
          throw invalidEntry(entry, 'has an invalid prefix length');
        this.#allowed.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
      }
    }
  }

  /** Why `raw` may not be stored as a webhook URL, or null when it may. */
  problemWith(raw: string): string | null {
    const url = URL.parse(raw);
    if (url === null) return 'must be an absolute URL';
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && this.#allowHttp))
      return this.#allowHttp ? 'must be an http or https URL' : 'must be an https URL';
    const host = hostOf(url);
    if (host === 'localhost' || host.endsWith('.localhost') || host.endsWith('.local'))
      return this.#nameAllowed(host) ? null : 'must not name this host or the local network';
    if (isIP(host) !== 0 && !this.addressAllowed(host, host))
      return 'must not point at a private, loopback or link-local address';
    return null;
  }

  /** Whether a delivery may connect to `address`, reached by the name `host`. */
  addressAllowed(host: string, address: string): boolean {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (this.#allowed.check(address, family) || this.#nameAllowed(host)) return true;
    return !this.#denied.check(address, family);
  }

  /**
   * The `lookup` of a delivery's connection: resolves the name, refuses it when any address it
   * resolves to is denied, and hands the connection only addresses it checked.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.#resolve(hostname, { all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as unknown as LookupAddress[];
      const refused = list.find((a) => !this.addressAllowed(hostname, a.address));
      const first = list[0];
      if (refused !== undefined || first === undefined) {
        return callback(
          Object.assign(new WebhookTargetRefused(`${hostname} resolves to a denied address`), {
            code: 'EWEBHOOKDENIED',
          }),
          '',
          0,
        );
      }
      // With `all` (Node's happy-eyeballs connect asks so) every address is handed over: each was checked.
      if (options.all === true) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      else callback(null, first.address, first.family);
    });
  };

  #nameAllowed(host: string): boolean {
    return this.#allowedNames.some((n) => n === host || (n.startsWith('*.') && host.endsWith(n.slice(1))));
  }
}

/** The URL's host without IPv6 brackets, lower-cased (WHATWG has normalised IPv4 forms already). */
function hostOf(url: URL): string {
  const host = url.hostname.toLowerCase();
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

function invalidEntry(entry: string, description: string): SvcError {
  return new SvcError('SVC-SYS-9002', `invalid configuration: SVC_WEBHOOK_ALLOWED_HOSTS: ${entry} ${description}`, {}, [
    { field: 'SVC_WEBHOOK_ALLOWED_HOSTS', description: `${entry} ${description}` },
  ]);
}
