import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Storage } from '../../control-plane/storage/storage.ts';
import {
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

/**
 * The control plane while its store cannot be reached: the store is made to fail the way a
 * driver does when the database is gone (a socket error, a pool that cannot connect in time).
 */
let cp: RunningControlPlane;
let key: string;
let failure: Error | null = null;

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
  const storage: Storage = cp.plane.storage;
  const transaction = storage.withTransaction.bind(storage);
  const health = storage.health.bind(storage);
  const budgets = storage.read.budgets;
  const list = budgets.list.bind(budgets);
  Object.assign(storage, {
    withTransaction: (fn: Parameters<Storage['withTransaction']>[0]) =>
      failure === null ? transaction(fn) : Promise.reject(failure),
    health: () => (failure === null ? health() : Promise.resolve({ status: 'down', detail: 'storage not reachable' })),
  });
  budgets.list = (...args) => (failure === null ? list(...args) : Promise.reject(failure));
});
afterAll(async () => cp.close());

const createBudget = () =>
  cp.call('POST', '/v1/budgets', { key, body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1 } } });

describe('a control plane whose store is unreachable', () => {
  it('answers writes and reads 503 SVC-SYS-9001 with Retry-After, reports down, and recovers', async () => {
    expect((await createBudget()).status).toBe(201);
    const lost = [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
    ];
    for (const error of lost) {
      failure = error;
      const write = await createBudget();
      const body = expectSvcError(write, 503, 'SVC-SYS-9001');
      expect(write.headers.get('retry-after')).toBe('5');
      // The driver's words stay in the log.
      expect(String(body.message)).not.toContain('127.0.0.1');
      const read = await cp.call('GET', '/v1/budgets', { key });
      expectSvcError(read, 503, 'SVC-SYS-9001');
    }

    const health = await cp.call('GET', '/health', { key: null });
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'down', services: { database: { status: 'down' } } });
    expect((await cp.call('GET', '/health/ready', { key: null })).status).toBe(503);
    expect((await cp.call('GET', '/health/live', { key: null })).status).toBe(200);

    // A failure of what was asked (not of the connection) stays an internal error.
    failure = Object.assign(new Error('duplicate key value'), { code: '23505' });
    expectSvcError(await createBudget(), 500, 'SVC-SYS-9007');

    failure = null;
    expect((await cp.call('GET', '/health', { key: null })).body).toMatchObject({ status: 'ok' });
    expect((await createBudget()).status).toBe(201);
    const budgets = await cp.call('GET', '/v1/budgets', { key });
    expect(budgets.body).toHaveLength(2);
  });
});
