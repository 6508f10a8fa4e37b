import type { FastifyRateLimitStore } from '@fastify/rate-limit';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../core/domain/index.ts';
import { minuteOf } from './minute-counts.ts';
import { createRequestRate, rateKey } from './request-rate.ts';
import { localMinuteCounts } from './shared-minute-counts.ts';

/** 45 s into a wall-clock minute. */
const LATE = Date.parse('2026-01-01T10:00:45Z');

const caller = (id: string): Principal => ({
  type: 'api_key',
  id,
  tenant_id: 'acme',
  scopes: new Set(),
  administrator: false,
});

function incr(store: FastifyRateLimitStore, key: string, max: number) {
  let result: { current: number; ttl: number } | undefined;
  store.incr(key, (_error, counted) => (result = counted), 60_000, max);
  return result;
}

describe('the request rate per credential and minute', () => {
  it('refuses past the limit until the minute turns, counting no refused request', async () => {
    let now = LATE;
    const counts = localMinuteCounts(10);
    const rate = createRequestRate(2, { now: () => now, counts });
    const key = rateKey(caller('k1'));
    await rate.take(caller('k1'));
    await rate.take(caller('k1'));
    await expect(rate.take(caller('k1'))).rejects.toMatchObject({
      code: 'SVC-SYS-9005',
      details: { limit: 2, retry_after_seconds: 15 },
    });
    expect(counts.count(key, minuteOf(now))).toBe(2);
    await expect(rate.take(caller('k2'))).resolves.toBeUndefined();
    now += 15_000;
    await expect(rate.take(caller('k1'))).resolves.toBeUndefined();
  });

  it("gives @fastify/rate-limit one store, counting into the same counts as the gRPC surface's", async () => {
    const counts = localMinuteCounts(10);
    const rate = createRequestRate(2, { now: () => LATE, counts });
    const Store = rate.store;
    const store = new Store({});
    expect(new Store({})).toBe(store);
    expect(store.child({} as never)).toBe(store);
    const key = rateKey(caller('k1'));
    expect(incr(store, key, 2)).toEqual({ current: 1, ttl: 15_000 });
    await rate.take(caller('k1'));
    expect(incr(store, key, 2)).toEqual({ current: 3, ttl: 15_000 });
    expect(counts.count(key, minuteOf(LATE))).toBe(2);
  });

  it('refuses on what its counts hold, the other replicas included', async () => {
    const counts = localMinuteCounts(10);
    const rate = createRequestRate(2, { now: () => LATE, counts });
    // As the other replicas' announcements add them.
    counts.add(rateKey(caller('k1')), minuteOf(LATE));
    counts.add(rateKey(caller('k1')), minuteOf(LATE));
    await expect(rate.take(caller('k1'))).rejects.toMatchObject({ code: 'SVC-SYS-9005' });
  });
});
