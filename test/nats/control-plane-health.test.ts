import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { eventually, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

/** GET /health's `cache` (spec 4.5): the copy of rulesets and budget states proxies enforce from. */
let nats: NatsServer;
let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  nats = await startNatsServer();
  cp = await startControlPlane({}, undefined, () =>
    openNatsMessaging(
      { connection: { servers: nats.url, name: 'health' }, bus: { publishTimeoutMs: 1_000 } },
      pino({ level: 'silent' }),
    ),
  );
  key = await tenantWithKey(cp, 'acme');
}, 30_000);

afterAll(async () => {
  await cp.close();
  await nats.dispose();
});

type Health = { status: string; services: Record<string, { status: string; detail?: string }> };
const health = async () => (await cp.call('GET', '/health', { key: null })).body as Health;

describe('the cache of GET /health', () => {
  it('is ok while the buckets are current, down while they cannot be written, ok again once they are', async () => {
    expect(await health()).toMatchObject({ status: 'ok', services: { cache: { status: 'ok' } } });

    await nats.stop();
    // A change the proxies must learn: its state cannot reach the bucket while NATS is away.
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'during', type: 'cost', limits: { max_cost_usd: 1 } },
    });
    expect(budget.status).toBe(201);
    const down = await eventually(health, (h) => h.services.cache?.status === 'down', 20_000, 200);
    expect(down.status).toBe('degraded');
    expect(down.services.cache?.detail).toMatch(/keys waiting/);
    expect((await cp.call('GET', '/health/ready', { key: null })).status).toBe(503);

    await nats.restart();
    const back = await eventually(health, (h) => h.services.cache?.status === 'ok', 30_000, 200);
    expect(back.services.cache).toEqual({ status: 'ok' });
  }, 90_000);
});
