import { createRequire } from 'node:module';
import ipaddr from 'ipaddr.js';
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Principal } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import { BoundedMemo } from '../../core/resilience/bounded-memo.ts';
import { MINUTE_MS, MinuteCounts, minuteOf } from './minute-counts.ts';

type LocalStoreCtor = new (continueExceeding: boolean, exponentialBackoff: boolean) => FastifyRateLimitStore;

// @fastify/rate-limit's own in-memory store (a fixed window per key in a bounded LRU).
const LocalStore = createRequire(import.meta.url)('@fastify/rate-limit/store/LocalStore.js') as LocalStoreCtor;

export const RATE_WINDOW_MS = 60_000;

/**
 * One request count per caller and replica, whichever surface the request comes by: REST (and the
 * MCP endpoint on the same server) through @fastify/rate-limit, gRPC through `take`. Counted apart,
 * a caller would have each surface's limit.
 */
export interface RequestRate {
  readonly perMinute: number;
  /** For @fastify/rate-limit's `store`: every instance it makes is the one shared store. */
  readonly store: FastifyRateLimitStoreCtor;
  /** Counts one request of the caller; rejects with SVC-SYS-9005 past the limit. */
  take(principal: Principal): Promise<void>;
}

export function rateKey(principal: Principal): string {
  return `${principal.type}:${principal.tenant_id}:${principal.id}`;
}

export function rateExceeded(max: number, ttlMs: number): SvcError {
  const seconds = Math.ceil(ttlMs / 1000);
  return new SvcError('SVC-SYS-9005', `rate limit of ${max} requests per minute exceeded; retry after ${seconds} s`, {
    limit: max,
    retry_after_seconds: seconds,
  });
}

export function createRequestRate(perMinute: number): RequestRate {
  const shared = new LocalStore(false, false);
  // A constructor that returns an object makes `new` give that object.
  const store = function SharedStore() {
    return shared;
  } as unknown as FastifyRateLimitStoreCtor;
  return {
    perMinute,
    store,
    take(principal) {
      return new Promise((resolve, reject) => {
        shared.incr(
          rateKey(principal),
          (error, result) => {
            if (error !== null || result === undefined) reject(error ?? new Error('rate store gave no count'));
            else if (result.current > perMinute) reject(rateExceeded(perMinute, result.ttl));
            else resolve();
          },
          RATE_WINDOW_MS,
          perMinute,
        );
      });
    },
  };
}

/**
 * Failed authentications per client address (an IPv6 one by its /64), on every surface, and with
 * announcements (`auth-failure-announcements.ts`) over every replica. The per-credential limit
 * counts only requests that authenticated, so without this one guessing keys were free.
 * Past the limit every request from the address is refused before its credential is looked at,
 * a valid one included: answering a right guess differently would keep the guessing useful.
 */
export interface AuthFailureLimit {
  readonly perMinute: number;
  /** Throws SVC-SYS-9005 while `address` is over its limit. */
  check(address: string): void;
  /** Counts one failed authentication of `address`. */
  fail(address: string): void;
  /** Counts `count` failures of `client` (as `clientOf` names it) that another replica made in `minute`. */
  addAnnounced(client: string, minute: number, count: number): void;
}

export interface AuthFailureLimitOptions {
  /** Epoch milliseconds: the wall clock when absent. */
  now?: () => number;
  /** Told of each failure counted here, to announce it to the other replicas. */
  onFailure?: (client: string, minute: number) => void;
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

/**
 * Clients whose failures are counted, here and as announced by the other replicas: one with more
 * addresses than this pushes out the least recently counted, as the request rate's store does.
 */
const COUNTED_CLIENTS = 5000;

export function createAuthFailureLimit(perMinute: number, options: AuthFailureLimitOptions = {}): AuthFailureLimit {
  const now = options.now ?? Date.now;
  const counts = new MinuteCounts(COUNTED_CLIENTS);
  const clients = new BoundedMemo(REMEMBERED_ADDRESSES, clientOf);
  return {
    perMinute,
    check(address) {
      const at = now();
      if (counts.count(clients.get(address), minuteOf(at)) >= perMinute)
        throw authFailuresExceeded(perMinute, MINUTE_MS - (at % MINUTE_MS));
    },
    fail(address) {
      const client = clients.get(address);
      const minute = minuteOf(now());
      counts.add(client, minute, 1, minute);
      options.onFailure?.(client, minute);
    },
    addAnnounced(client, minute, count) {
      counts.add(client, minute, count, minuteOf(now()));
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
