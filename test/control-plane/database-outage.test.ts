import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { subjects } from '../../core/bus/subjects.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { ADMIN_URL, createTestDatabase, postgresReachable, type TestDatabase } from '../harness/postgres.ts';
import { startTcpRelay, type TcpRelay } from '../harness/tcp-relay.ts';

/**
 * A control plane on PostgreSQL whose connection to the database is cut and restored: a relay
 * between them stands for the network (or the database server going away).
 */
const available = await postgresReachable();

describe.skipIf(!available)('a control plane whose PostgreSQL goes away', () => {
  let database: TestDatabase;
  let relay: TcpRelay;
  let cp: RunningControlPlane;
  let key: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    const server = new URL(ADMIN_URL);
    relay = await startTcpRelay({ host: server.hostname, port: Number(server.port || 5432) });
    const relayed = new URL(database.url);
    relayed.hostname = '127.0.0.1';
    relayed.port = String(relay.port);
    cp = await startControlPlane({ database_url: relayed.toString(), database_pool_size: 2 });
    key = await tenantWithKey(cp, 'acme');
  });
  afterAll(async () => {
    await cp?.close();
    await relay?.close();
    await database?.drop();
  });

  const createBudget = (name: string) =>
    cp.call('POST', '/v1/budgets', { key, body: { name, type: 'cost', limits: { max_cost_usd: 1 } } });
  const health = () => cp.call('GET', '/health', { key: null });

  it('answers 503 SVC-SYS-9001 with Retry-After and reports the database down, writes nothing, and recovers', async () => {
    expect((await createBudget('before')).status).toBe(201);

    await relay.cut();
    const refused = await createBudget('during');
    expectSvcError(refused, 503, 'SVC-SYS-9001');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expectSvcError(await cp.call('GET', '/v1/budgets', { key }), 503, 'SVC-SYS-9001');
    const down = await health();
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ status: 'down', services: { database: { status: 'down' } } });
    expect((await cp.call('GET', '/health/ready', { key: null })).status).toBe(503);
    expect((await cp.call('GET', '/health/live', { key: null })).status).toBe(200);

    await relay.restore();
    await eventually(
      async () => (await health()).status,
      (status) => status === 200,
      15_000,
    );
    expect((await createBudget('after')).status).toBe(201);
    const names = ((await cp.call('GET', '/v1/budgets', { key })).body as { name: string }[]).map((b) => b.name);
    expect(names.sort()).toEqual(['after', 'before']);
  });

  it('applies every event that arrived while the database was away, setting none aside', async () => {
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'metered', type: 'token', limits: { max_tokens: 1_000_000 } },
    });
    const budgetId = budget.body.budget_id as string;
    await relay.cut();
    for (let i = 0; i < 10; i++) {
      const event = {
        event_id: randomUUID(),
        tenant_id: 'acme',
        envelope_id: randomUUID(),
        budget_id: budgetId,
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        tokens: { input: 100, output: 0 },
        model: 'gpt-4o-mini',
        cost_usd: 0,
        source: 'proxy:pod-a',
      };
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    // Long enough for every message to have used up its attempts, were the outage counted.
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    await relay.restore();
    await eventually(
      async () => (await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key })).body as { tokens_input?: number },
      (usage) => usage.tokens_input === 1000,
      20_000,
    );
    expect(cp.plane.processor.stats.rejected).toBe(0);
  }, 40_000);
});
