import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import { subjects } from '../../core/bus/subjects.ts';
import type { Principal } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import { MINUTE_MS, minuteOf, msLeftInMinute } from './minute-counts.ts';
import { localMinuteCounts, type CountedKind, type SharedMinuteCounts } from './shared-minute-counts.ts';

export const RATE_WINDOW_MS = MINUTE_MS;

/**
 * One request count per caller and wall-clock minute, whichever surface the request comes by:
 * REST (and the MCP endpoint on the same server) through @fastify/rate-limit, gRPC through
 * `take`, and over every replica (`shared-minute-counts.ts`). Counted apart, a caller would have
 * each surface's limit, and each replica's.
 */
export interface RequestRate {
  readonly perMinute: number;
  /** For @fastify/rate-limit's `store`: every instance it makes is the one shared store. */
  readonly store: FastifyRateLimitStoreCtor;
  /** Counts one request of the caller; rejects with SVC-SYS-9005 past the limit. */
  take(principal: Principal): Promise<void>;
}

export const REQUEST_COUNTS: CountedKind = {
  subject: subjects.requestCounts,
  // `rateKey`: an API key's is under 100 characters; a JWT's `sub` has no bound, and a caller
  // whose key is longer than this is counted under the key's digest.
  maxKeyChars: 256,
  // As @fastify/rate-limit's own in-memory store: past it the least recently counted caller is
  // forgotten.
  capacity: 5000,
  label: 'requests',
};

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

export function createRequestRate(
  perMinute: number,
  options: { now?: () => number; counts?: SharedMinuteCounts } = {},
): RequestRate {
  const now = options.now ?? Date.now;
  const counts = options.counts ?? localMinuteCounts(REQUEST_COUNTS.capacity);
  // A refused request is not counted: it takes nothing, and the other replicas need not hear of it.
  const incr = (key: string, max: number) => {
    const at = now();
    const minute = minuteOf(at);
    const current = counts.count(key, minute) + 1;
    if (current <= max) counts.add(key, minute);
    return { current, ttl: msLeftInMinute(at) };
  };
  const shared: FastifyRateLimitStore = {
    incr: (key, callback, _timeWindow, max) => callback(null, incr(key, max)),
    // Asked for by a route with a limit of its own; none has one, and all count in the one store.
    child: () => shared,
  };
  // A constructor that returns an object makes `new` give that object.
  const store = function SharedStore() {
    return shared;
  } as unknown as FastifyRateLimitStoreCtor;
  return {
    perMinute,
    store,
    take(principal) {
      const { current, ttl } = incr(rateKey(principal), perMinute);
      return current > perMinute ? Promise.reject(rateExceeded(perMinute, ttl)) : Promise.resolve();
    },
  };
}
