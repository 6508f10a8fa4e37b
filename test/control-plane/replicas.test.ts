import { randomUUID } from 'node:crypto';
import { connect } from 'nats';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { BUCKETS, BudgetStateSchema, keys, RulesetSnapshotSchema } from '../../core/sync/contract.ts';
import type { Budgets } from '../../control-plane/budgets/budgets.ts';
import { EventProcessor } from '../../control-plane/processor/event-processor.ts';
import { StatePublisher } from '../../control-plane/sync/state-publisher.ts';
import { createPricer } from '../../control-plane/usage/pricer.ts';
import { eventually, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

/**
 * Two replicas of the control plane on one store and one nats-server: the second replica's
 * processor and publisher run beside the first's on their own NATS connection, as a second
 * process would (an LMDB environment serves one process, so they share the first's store).
 */
const silent = pino({ level: 'silent' });
const ACK_WAIT_MS = 1_500;
let nats: NatsServer;
const opened: Messaging[] = [];
let cp: RunningControlPlane;
let key: string;

const natsMessaging = (name: string) => async (): Promise<Messaging> =>
  openNatsMessaging({ connection: { servers: nats.url, name }, bus: { ackWaitMs: ACK_WAIT_MS } }, silent);

beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => nats.dispose());
afterEach(async () => {
  await cp.close();
  await Promise.all(opened.splice(0).map((m) => m.close()));
});

async function secondReplica(): Promise<Messaging> {
  const messaging = await natsMessaging('replica-b')();
  opened.push(messaging);
  return messaging;
}

async function budget(limits: Record<string, number>): Promise<string> {
  const res = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name: 'b', type: 'hybrid', limits, period: 'total' },
  });
  expect(res.status).toBe(201);
  return res.body.budget_id as string;
}

function usageEvent(budgetId: string, input: number, eventId = randomUUID()) {
  return {
    event_id: eventId,
    tenant_id: 'acme',
    envelope_id: `env-${eventId}`,
    budget_id: budgetId,
    event_type: 'llm.call',
    timestamp: new Date().toISOString(),
    tokens: { input, output: 0 },
    cost_usd: 0,
    source: 'proxy:pod-a',
  };
}

describe('event processors of two replicas', () => {
  it('share the durable as competing consumers and count each event once, redelivered or duplicated', async () => {
    cp = await startControlPlane(
      { processor_batch_size: 8, processor_max_wait_ms: 20 },
      undefined,
      natsMessaging('replica-a'),
    );
    key = await tenantWithKey(cp, 'acme');
    const budgetId = await budget({ max_tokens: 100_000_000 });
    const publish = (event: ReturnType<typeof usageEvent>, msgId = event.event_id) =>
      cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId });

    // A replica that pulls a batch and dies before acknowledging it: JetStream hands the batch to
    // the others once the ack wait ran out.
    await cp.plane.processor.stop();
    const crashed = [usageEvent(budgetId, 1), usageEvent(budgetId, 1), usageEvent(budgetId, 1)];
    for (const event of crashed) await publish(event);
    const nc = await connect({ servers: nats.url });
    const consumer = await nc.jetstream().consumers.get('SVC_EVENTS', 'event-processor');
    let held = 0;
    for await (const message of await consumer.fetch({ max_messages: crashed.length, expires: 2_000 })) {
      expect(message.info.redeliveryCount).toBe(1);
      held++;
    }
    expect(held).toBe(crashed.length);
    await nc.close();

    const options = { batchSize: 8, maxWaitMs: 20 };
    await cp.plane.processor.start(options);
    const replicaB = new EventProcessor({
      audit: cp.plane.services.audit,
      pricer: createPricer(loadPriceTable()),
      messaging: await secondReplica(),
      effects: cp.plane.effects,
      logger: silent,
      clock: () => new Date(),
    });
    await replicaB.start(options);

    const events = Array.from({ length: 120 }, () => usageEvent(budgetId, 10));
    // Each event once more under another message id, as an outbox replay after the bus's
    // de-duplication window would send it: the event id still makes it count once.
    const replays = events.filter((_, i) => i % 4 === 0);
    await Promise.all([...events.map((e) => publish(e)), ...replays.map((e) => publish(e, `replay-${e.event_id}`))]);

    const usage = () => cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key });
    const expected = { llm_calls: events.length + crashed.length, tokens_input: events.length * 10 + crashed.length };
    await eventually(
      async () => (await usage()).body as { llm_calls: number },
      (u) => u.llm_calls >= expected.llm_calls,
      30_000,
    );
    const stats = [cp.plane.processor.stats, replicaB.stats];
    await eventually(
      () => stats.reduce((n, s) => n + s.applied + s.duplicates, 0),
      (n) => n === expected.llm_calls + replays.length,
      10_000,
    );
    expect((await usage()).body).toMatchObject(expected);
    expect(stats.reduce((n, s) => n + s.applied, 0)).toBe(expected.llm_calls);
    expect(stats.reduce((n, s) => n + s.duplicates, 0)).toBe(replays.length);
    // Both replicas took a share of the stream.
    expect(stats.map((s) => s.applied).every((n) => n > 0)).toBe(true);
    await replicaB.stop();
  });
});

/** Holds the next budget read of a racing publisher: it tells `reading`, then waits at `gate`. */
interface Gate {
  on: boolean;
  reading?: () => void;
  gate?: Promise<void>;
}

/** Has `publisher` send the budget's state and waits until its read is held; resolves to its release. */
async function heldBudgetRead(gated: Gate, publisher: StatePublisher, budgetId: string): Promise<() => void> {
  let release!: () => void;
  gated.gate = new Promise((resolve) => (release = resolve));
  const reading = new Promise<void>((resolve) => (gated.reading = resolve));
  gated.on = true;
  publisher.push([{ kind: 'budget', tenant: 'acme', budgetId }]);
  await reading;
  return release;
}

describe('state publishers of two replicas', () => {
  /** The second replica's publisher; its budget reads wait at `gate` while `gated` is set. */
  async function racingPublisher(gated: Gate) {
    const { services } = cp.plane;
    const budgets = Object.create(services.budgets) as Budgets;
    budgets.find = async (tenant, budgetId) => {
      const found = await services.budgets.find(tenant, budgetId);
      if (gated.on) {
        gated.on = false;
        gated.reading?.();
        await gated.gate;
      }
      return found;
    };
    const publisher = new StatePublisher({
      messaging: await secondReplica(),
      policies: services.policies,
      budgets,
      leases: services.leases,
      tenants: services.tenants,
      envelopes: cp.plane.storage.read.envelopes,
      holdMaxAgeMs: 3_600_000,
      clock: () => new Date(),
      logger: silent,
    });
    await publisher.start();
    return publisher;
  }

  it('never leave a budget state read before another replica wrote a newer one', async () => {
    cp = await startControlPlane({}, undefined, natsMessaging('replica-a'));
    key = await tenantWithKey(cp, 'acme');
    const budgetId = await budget({ max_cost_usd: 10 });
    const gated: Gate = { on: false };
    const replicaB = await racingPublisher(gated);
    // B reads the budget before any usage, and is held there.
    const release = await heldBudgetRead(gated, replicaB, budgetId);

    const envelope = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'x' } });
    const event = await cp.call('POST', `/v1/envelopes/${envelope.body.envelope_id}/events`, {
      key,
      body: { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: 0.5 },
    });
    expect(event.status).toBe(202);
    const bucket = await cp.messaging.keyValue.open(BUCKETS.budgets);
    const state = async () => BudgetStateSchema.parse((await bucket.get(keys.budget('acme', budgetId)))?.value);
    await eventually(state, (s) => s.used_micros === 500_000);

    release();
    await replicaB.idle();
    expect(await state()).toMatchObject({ used_micros: 500_000, unleased_micros: 9_500_000 });
    await replicaB.stop();
  });

  it('never leave the state of a budget another replica deleted after it was read', async () => {
    cp = await startControlPlane({}, undefined, natsMessaging('replica-a'));
    key = await tenantWithKey(cp, 'acme');
    const budgetId = await budget({ max_cost_usd: 10 });
    const gated: Gate = { on: false };
    const replicaB = await racingPublisher(gated);
    const bucket = await cp.messaging.keyValue.open(BUCKETS.budgets);
    const stateKey = keys.budget('acme', budgetId);
    await eventually(
      async () => bucket.get(stateKey),
      (entry) => entry !== undefined,
    );
    const deletions: number[] = [];
    const watch = await bucket.watch(stateKey, (entry) => {
      if (entry.operation === 'DEL') deletions.push(entry.revision);
    });
    // The key has no value, as before a budget's first publication: B's write will create it.
    await bucket.delete(stateKey);
    await eventually(
      () => deletions.length,
      (n) => n === 1,
    );

    // B finds the budget and is held before it writes the state.
    const release = await heldBudgetRead(gated, replicaB, budgetId);
    // Meanwhile the first replica deletes it, and removes its state from the bucket.
    expect((await cp.call('DELETE', `/v1/budgets/${budgetId}`, { key })).status).toBe(200);
    await eventually(
      () => deletions.length,
      (n) => n === 2,
    );

    release();
    await replicaB.idle();
    expect(await bucket.get(stateKey)).toBeUndefined();
    await watch.unsubscribe();
    await replicaB.stop();
  });

  it('never replace a ruleset version with an older or equal one', async () => {
    cp = await startControlPlane({}, undefined, natsMessaging('replica-a'));
    key = await tenantWithKey(cp, 'acme');
    const replicaB = await racingPublisher({ on: false });
    const bucket = await cp.messaging.keyValue.open(BUCKETS.rulesets);
    const snapshot = async () => RulesetSnapshotSchema.parse((await bucket.get(keys.ruleset('acme')))?.value);

    // Both replicas push the tenant's ruleset while policies are written on the first.
    for (let i = 0; i < 5; i++) {
      replicaB.push([{ kind: 'ruleset', tenant: 'acme' }]);
      const res = await cp.call('POST', '/v1/policies', {
        key,
        body: { name: `p${i}`, rules: [{ action: `tool:t${i}`, effect: 'deny' }] },
      });
      expect(res.status).toBe(201);
      replicaB.push([{ kind: 'ruleset', tenant: 'acme' }]);
    }
    await replicaB.idle();
    const version = await cp.plane.storage.read.policies.version('acme');
    const published = await eventually(snapshot, (s) => s.version === version);
    expect(published.policies).toHaveLength(5);

    // What the bucket holds is not sent again: not even its publication time changes.
    const entry = await bucket.get(keys.ruleset('acme'));
    replicaB.push([{ kind: 'ruleset', tenant: 'acme' }]);
    await replicaB.idle();
    expect((await bucket.get(keys.ruleset('acme')))?.revision).toBe(entry?.revision);

    // A newer version in the bucket (a replica further ahead) stays.
    await bucket.put(keys.ruleset('acme'), { ...published, version: version + 1, policies: [] });
    replicaB.push([{ kind: 'ruleset', tenant: 'acme' }]);
    await replicaB.idle();
    expect(await snapshot()).toMatchObject({ version: version + 1, policies: [] });
    await replicaB.stop();
  });
});
