import { BlockList, isIP } from 'node:net';
import { SvcError } from '../../core/errors/index.ts';

/**
 * Refused whatever the configuration: the link-local block holds the cloud metadata services
 * (169.254.169.254 on AWS, GCP, Azure and OCI, 169.254.170.2 for ECS task credentials,
 * fd00:ec2::254 on AWS over IPv6), Alibaba's sits at 100.100.100.200, and 0.0.0.0/8 and `::`
 * reach the local host on Linux. Multicast and reserved blocks carry no HTTP.
 */
const ALWAYS_REFUSED = [
  '0.0.0.0/8',
  '169.254.0.0/16',
  '100.100.100.200/32',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/128',
  'fe80::/10',
  'fd00:ec2::254/128',
  'ff00::/8',
];

/** Private, shared and loopback ranges: refused only with `proxy_egress_private=deny`. */
const PRIVATE = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '::1/128',
  'fc00::/7',
];

export type PrivateEgress = 'allow' | 'deny';

export interface AddressPolicyOptions {
  private?: PrivateEgress;
  /** Further CIDRs (or single addresses) refused. */
  denyCidrs?: readonly string[];
  /** CIDRs reachable even inside a refused range; they win over every refusal. */
  allowCidrs?: readonly string[];
}

function blockList(cidrs: readonly string[], key: string): BlockList {
  const list = new BlockList();
  for (const entry of cidrs) {
    const [address = '', prefix] = entry.split('/');
    const family = isIP(address);
    const bits = prefix === undefined ? (family === 6 ? 128 : 32) : Number(prefix);
    if (family === 0 || !Number.isInteger(bits) || bits < 0 || bits > (family === 6 ? 128 : 32)) {
      const description = `"${entry}" is not a CIDR such as 10.0.0.0/8 or fd00::/8`;
      throw new SvcError('SVC-SYS-9002', `invalid ${key}: ${description}`, { fields: key }, [
        { field: key, description },
      ]);
    }
    list.addSubnet(address, bits, family === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

/** The 16 bytes of an IPv6 literal (already validated by isIP). */
function ipv6Bytes(address: string): number[] {
  const [head = '', tail] = address.split('::');
  const words = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const front = words(head);
  const back = tail === undefined ? [] : words(tail);
  const all = [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
  return all.flatMap((w) => [w >> 8, w & 0xff]);
}

const dotted = (bytes: number[]): string => bytes.join('.');

/**
 * The IPv4 address an IPv6 one carries and that a gateway would dial: IPv4-mapped
 * (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64
 * (64:ff9b::/96, and the local-use 64:ff9b:1::/48 read as a /96 prefix, the form its NAT64
 * gateways use, RFC 8215) and 6to4 (2002::/16).
 */
export function embeddedIpv4(address: string): string | undefined {
  if (isIP(address) !== 6) return undefined;
  const b = ipv6Bytes(address.toLowerCase());
  const zeroUpTo = (n: number) => b.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(10) && b[10] === 0xff && b[11] === 0xff) return dotted(b.slice(12));
  if (zeroUpTo(8) && b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return dotted(b.slice(12));
  if (zeroUpTo(12) && b.slice(12).some((x) => x !== 0) && !(b.slice(12, 15).every((x) => x === 0) && b[15] === 1)) {
    return dotted(b.slice(12));
  }
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    if (b.slice(4, 12).every((x) => x === 0)) return dotted(b.slice(12));
    if (b[4] === 0x00 && b[5] === 0x01) return dotted(b.slice(12));
  }
  if (b[0] === 0x20 && b[1] === 0x02) return dotted(b.slice(2, 6));
  return undefined;
}

/**
 * Which resolved addresses the proxy may dial. Every address is checked together with the
 * IPv4 address it embeds, so a mapped or translated form of a refused address is refused too.
 */
export class AddressPolicy {
  readonly #classes: { label: string; list: BlockList }[];
  readonly #allowed: BlockList;

  constructor(options: AddressPolicyOptions = {}) {
    this.#classes = [{ label: 'link-local, metadata or reserved', list: blockList(ALWAYS_REFUSED, 'built-in') }];
    if (options.private === 'deny')
      this.#classes.push({ label: 'private or loopback', list: blockList(PRIVATE, 'built-in') });
    if (options.denyCidrs !== undefined && options.denyCidrs.length > 0) {
      this.#classes.push({
        label: 'denied by configuration',
        list: blockList(options.denyCidrs, 'proxy_egress_deny_cidrs'),
      });
    }
    this.#allowed = blockList(options.allowCidrs ?? [], 'proxy_egress_allow_cidrs');
  }

  /** Why `address` (an IP literal) may not be dialled, or undefined when it may. */
  refusal(address: string): string | undefined {
    const embedded = embeddedIpv4(address);
    for (const candidate of embedded === undefined ? [address] : [address, embedded]) {
      const type = isIP(candidate) === 6 ? 'ipv6' : 'ipv4';
      if (this.#allowed.check(candidate, type)) continue;
      const hit = this.#classes.find((c) => c.list.check(candidate, type));
      if (hit !== undefined) return candidate === address ? hit.label : `${hit.label} (embeds ${candidate})`;
    }
    return undefined;
  }
}
