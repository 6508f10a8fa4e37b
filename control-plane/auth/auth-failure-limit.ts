import ipaddr from 'ipaddr.js';
import { subjects } from '../../core/bus/subjects.ts';
import { SvcError } from '../../core/errors/index.ts';
import { BoundedMemo } from '../../core/resilience/bounded-memo.ts';
import { minuteOf, msLeftInMinute } from './minute-counts.ts';
import { localMinuteCounts, type CountedKind, type SharedMinuteCounts } from './shared-minute-counts.ts';

/**
 * Failed authentications per client address (an IPv6 one by its /64), on every surface, and over
 * every replica (`shared-minute-counts.ts`). The per-credential limit counts only requests that
 * authenticated, so without this one guessing keys were free.
 * Past the limit every request from the address is refused before its credential is looked at,
 * a valid one included: answering a right guess differently would keep the guessing useful.
 */
export interface AuthFailureLimit {
  readonly perMinute: number;
  /** Throws SVC-SYS-9005 while `address` is over its limit. */
  check(address: string): void;
  /** Counts one failed authentication of `address`. */
  fail(address: string): void;
}

/**
 * The client an address counts for: an IPv6 address by its /64, since one host is handed a whole
 * /64 and would otherwise have 2^64 limits; an IPv4 address written as IPv6 (`::ffff:1.2.3.4`) as
 * the IPv4 one. An address no parser reads counts as it is written.
 */
export function clientOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${parsed.toString()}/64`).toString()}/64`;
}

/**
 * Addresses whose client is remembered: a request's address is parsed on every authentication,
 * and clients are few; one that makes up addresses only pushes out the oldest.
 */
const REMEMBERED_ADDRESSES = 4096;

export const AUTH_FAILURE_COUNTS: CountedKind = {
  subject: subjects.authFailures,
  // An IPv6 /64 is 42 characters; a longer client is an address no parser reads, counted under
  // its digest.
  maxKeyChars: 64,
  // A client with more addresses than this pushes out the least recently counted, as the request
  // rate's counts do.
  capacity: 5000,
  label: 'failed authentications',
};

export function createAuthFailureLimit(
  perMinute: number,
  options: { now?: () => number; counts?: SharedMinuteCounts } = {},
): AuthFailureLimit {
  const now = options.now ?? Date.now;
  const counts = options.counts ?? localMinuteCounts(AUTH_FAILURE_COUNTS.capacity);
  const clients = new BoundedMemo(REMEMBERED_ADDRESSES, clientOf);
  return {
    perMinute,
    check(address) {
      const at = now();
      if (counts.count(clients.get(address), minuteOf(at)) >= perMinute)
        throw authFailuresExceeded(perMinute, msLeftInMinute(at));
    },
    fail(address) {
      counts.add(clients.get(address), minuteOf(now()));
    },
  };
}

function authFailuresExceeded(max: number, ttlMs: number): SvcError {
  const seconds = Math.ceil(ttlMs / 1000);
  return new SvcError(
    'SVC-SYS-9005',
    `too many failed authentications from this address (${max} per minute); retry after ${seconds} s`,
    { limit: max, retry_after_seconds: seconds },
  );
}
