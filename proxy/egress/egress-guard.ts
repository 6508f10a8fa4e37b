import { promises as dns, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { SvcError } from '../../core/errors/index.ts';
import { AddressPolicy } from './address-policy.ts';

/** Resolves a host name to every address it has; injected so that tests control resolution. */
export type Resolve = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolve: Resolve = (hostname) => dns.lookup(hostname, { all: true, order: 'verbatim' });

export interface EgressGuardOptions {
  policy?: AddressPolicy;
  resolve?: Resolve;
  /** Called once per refused connection, for the refusal metric. */
  onRefused?: () => void;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

function bare(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/**
 * Checks every connection the proxy dials on the address it really dials: an IP literal as it
 * is, a name through `lookup`, which resolves once, refuses when any address is refused, and
 * hands exactly the checked addresses to the socket. So a name that resolves to a metadata
 * address, or answers differently on a second lookup (DNS rebinding), never gets through.
 */
export class EgressGuard {
  readonly #policy: AddressPolicy;
  readonly #resolve: Resolve;
  readonly #onRefused: () => void;

  constructor(options: EgressGuardOptions = {}) {
    this.#policy = options.policy ?? new AddressPolicy();
    this.#resolve = options.resolve ?? systemResolve;
    this.#onRefused = options.onRefused ?? (() => undefined);
  }

  /** The refusal for a host given as an IP literal; undefined for an allowed literal or a name. */
  checkLiteral(host: string): SvcError | undefined {
    const address = bare(host);
    if (isIP(address) === 0) return undefined;
    const why = this.#policy.refusal(address);
    return why === undefined ? undefined : this.#refused(address, address, why);
  }

  /** A `lookup` for `net.connect`, `tls.connect` and undici's connector. */
  readonly lookup: LookupFunction = (hostname: string, options: LookupOptions, callback: LookupCallback) => {
    this.#checkedAddresses(hostname, options.family).then(
      (addresses) => {
        const [first] = addresses;
        if (options.all === true) callback(null, addresses);
        else if (first !== undefined) callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, options.all === true ? [] : ''),
    );
  };

  async #checkedAddresses(hostname: string, family: LookupOptions['family']): Promise<LookupAddress[]> {
    const literal = bare(hostname);
    const resolved =
      isIP(literal) !== 0 ? [{ address: literal, family: isIP(literal) }] : await this.#resolve(hostname);
    // Every address is checked, not only the one dialled first: a fallback must be as safe.
    for (const { address } of resolved) {
      const why = this.#policy.refusal(address);
      if (why !== undefined) throw this.#refused(hostname, address, why);
    }
    const wanted = family === 4 || family === 'IPv4' ? 4 : family === 6 || family === 'IPv6' ? 6 : 0;
    const addresses = wanted === 0 ? resolved : resolved.filter((a) => a.family === wanted);
    if (addresses.length === 0) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
    }
    return addresses;
  }

  #refused(host: string, address: string, why: string): SvcError {
    this.#onRefused();
    const subject = host === address ? address : `${host} (resolved to ${address})`;
    return new SvcError('SVC-ADP-5003', `egress to ${subject} refused: ${why} address`, {
      host,
      address,
      range: why,
    });
  }
}
