import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { BudgetLease, type Reservation } from '../../proxy/enforcement/budget-lease.ts';
import { PICO_PER_MICRO } from '../../proxy/enforcement/amounts.ts';
import { eventually, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

/**
 * A proxy's budget lease against a real control plane over a real nats-server, on the storage
 * SVC_TEST_STORAGE names: a renewal the control plane commits after the proxy stopped waiting
 * (its answer is lost) is sent again, and its spend is counted once.
 */
const silent = pino({ level: 'silent' });
const TIMEOUT_MS = 1_000;
let nats: NatsServer;
let cp: RunningControlPlane;
let proxyMessaging: Messaging;

beforeAll(async () => {
  nats = await startNatsServer();
  const connect = (name: string) => () => openNatsMessaging({ connection: { servers: nats.url, name } }, silent);
  cp = await startControlPlane({}, undefined, connect('control-plane'));
  proxyMessaging = await connect('proxy')();
});
afterAll(async () => {
  await proxyMessaging.close();
  await cp.close();
  await nats.dispose();
});

it('counts the spend of a renewal whose answer was lost once, and what was spent since in the next report', async () => {
  const key = await tenantWithKey(cp, 'acme');
  const created = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name: 'b', type: 'cost', limits: { max_cost_usd: 10 }, period: 'total' },
  });
  expect(created.status).toBe(201);
  const budgetId = created.body.budget_id as string;
  const usd = (amount: number) => amount * 1e6 * PICO_PER_MICRO;
  const lease = new BudgetLease(
    budgetId,
    {
      tenantId: 'acme',
      holder: 'proxy-1',
      want: { tokens: 0, pico: usd(1) },
      softLimit: { tokens: 0, pico: 0 },
      renewBelow: 0.2,
      timeoutMs: TIMEOUT_MS,
    },
    proxyMessaging.requests,
    { outcome: () => undefined, warn: () => undefined },
  );
  const spend = (amount: number) =>
    (lease.reserve({ tokens: 1, pico: usd(amount) }, { tokens: 1, pico: usd(amount) }) as Reservation).settle({
      tokens: 1,
      pico: usd(amount),
    });
  const { storage } = cp.plane;
  const periodStart = (await storage.read.budgets.get('acme', budgetId))!.usage.period_start;
  const reported = async () => (await storage.read.leases.pendingSpend('acme', budgetId, periodStart)).micros;

  await lease.renew();
  expect(lease.mode).toBe('granted');
  spend(0.3);

  // The budget is held by another transaction: the renewal waits in the control plane past the
  // proxy's time-out, and commits once the budget is free again, answering no one.
  let free!: () => void;
  const freed = new Promise<void>((resolve) => (free = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const holder = storage.withTransaction(async (tx) => {
    await tx.budgets.getForUpdate('acme', budgetId);
    held();
    await freed;
  });
  await holding;
  await lease.renew();
  expect(lease.mode).toBe('soft');
  spend(0.1);
  free();
  await holder;
  await eventually(reported, (micros) => micros === 300_000, 10_000);

  // The lease sends the same report again on its own retry, now answered: counted already, it
  // adds nothing.
  await eventually(
    () => lease.mode,
    (mode) => mode === 'granted',
    15_000,
  );
  expect(await reported()).toBe(300_000);

  await lease.renew();
  expect(await reported()).toBe(400_000);
  await lease.release();
  expect(await reported()).toBe(400_000);
});
