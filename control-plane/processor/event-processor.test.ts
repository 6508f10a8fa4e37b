import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { subjects } from '../../core/bus/subjects.ts';
import {
  MAX_ID_LENGTH,
  MAX_MODELS_PER_ENVELOPE,
  MAX_TOTAL,
  MAX_TOTAL_USD,
  OTHER_MODELS,
} from '../../core/domain/index.ts';
import { LeaseGrantSchema, syncSubjects } from '../../core/sync/contract.ts';
import { StatePublisher } from '../sync/state-publisher.ts';
import {
  eventually,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../../test/harness/control-plane.ts';
import { withOffset } from '../../test/harness/offset-time.ts';

let cp: RunningControlPlane;
let key: string;
let budgetId: string;
beforeEach(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
  const budget = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name: 'b', type: 'hybrid', limits: { max_tokens: 1_000_000 }, period: 'total' },
  });
  budgetId = budget.body.budget_id as string;
});
afterEach(async () => cp.close());

function usageEvent(envelopeId: string, input: number, eventId = randomUUID(), tenant = 'acme') {
  return {
    event_id: eventId,
    tenant_id: tenant,
    envelope_id: envelopeId,
    budget_id: budgetId,
    event_type: 'llm.call',
    timestamp: new Date().toISOString(),
    tokens: { input, output: 0 },
    cost_usd: 0,
    source: 'proxy:pod-a',
  };
}

const usage = async (): Promise<{ tokens_input: number; llm_calls: number }> =>
  (await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key })).body as { tokens_input: number; llm_calls: number };

describe('event processor', () => {
  it('lets a replayed event id change nothing, not even open the other envelope it names', async () => {
    const first = usageEvent(randomUUID(), 10);
    const replay = { ...usageEvent(randomUUID(), 10), event_id: first.event_id };
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), first, { msgId: 'first' });
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), replay, { msgId: 'replay' });
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 1 && s.duplicates === 1,
    );
    expect((await cp.call('GET', `/v1/envelopes/${first.envelope_id}`, { key })).status).toBe(200);
    expect((await cp.call('GET', `/v1/envelopes/${replay.envelope_id}`, { key })).status).toBe(404);
    expect(await usage()).toMatchObject({ tokens_input: 10, llm_calls: 1 });
  });

  it("records PAUSED from a proxy's immune.anomaly event with action pause, and only that action", async () => {
    const paused = randomUUID();
    const alerted = randomUUID();
    const anomaly = (envelopeId: string, action: string) => ({
      ...usageEvent(envelopeId, 0),
      event_type: 'immune.anomaly',
      payload: { kind: 'call_rate', count: 40, baseline: 3, z: 12, interval_start: new Date().toISOString(), action },
    });
    for (const [envelopeId, action] of [
      [paused, 'pause'],
      [alerted, 'alert'],
    ] as const) {
      const first = usageEvent(envelopeId, 1);
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), first, { msgId: first.event_id });
      const event = anomaly(envelopeId, action);
      await cp.messaging.bus.publish(subjects.event('acme', 'immune.anomaly'), event, { msgId: event.event_id });
    }
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 4,
    );
    const envelope = (id: string) => cp.call('GET', `/v1/envelopes/${id}`, { key });
    expect((await envelope(paused)).body).toMatchObject({
      state: 'PAUSED',
      status_reason: 'immune system: call_rate anomaly',
    });
    expect((await envelope(alerted)).body).toMatchObject({ state: 'RUNNING' });
    // Spec 3.1: PAUSED runs again through UpdateEnvelopeStatus.
    const resumed = await cp.call('POST', `/v1/envelopes/${paused}/status`, { key, body: { status: 'RUNNING' } });
    expect(resumed.body).toMatchObject({ state: 'RUNNING' });
  });

  it('refuses a subject whose tenant could not be a tenant id, at once, and goes on', async () => {
    for (const tenant of ['t'.repeat(65), 'x'.repeat(2_000)]) {
      const event = usageEvent(randomUUID(), 1, randomUUID(), tenant);
      await cp.messaging.bus.publish(subjects.event(tenant, 'llm.call'), event, { msgId: event.event_id });
    }
    const good = usageEvent(randomUUID(), 7);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), good, { msgId: good.event_id });
    // Retrying a write storage cannot take would hold the good event back for seconds.
    // The counters move after the commit, so the usage may be readable a moment before they do.
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 1,
      1_000,
    );
    expect(cp.plane.processor.stats).toMatchObject({ rejected: 2, applied: 1 });
    expect(await usage()).toMatchObject({ llm_calls: 1 });
  });

  it('refuses, at once, a denial whose msg id (its de-duplication key) is longer than an id may be', async () => {
    const violation = (message: string) => ({
      tenant_id: 'acme',
      policy_id: 'p1',
      rule_id: null,
      denied_action: 'tool:shell',
      decision: 'DENY',
      envelope_id: null,
      message,
      occurred_at: new Date().toISOString(),
      source: 'proxy:pod-a',
    });
    await cp.messaging.bus.publish(subjects.policyViolation('acme'), violation('long'), {
      msgId: 'm'.repeat(3_000),
    });
    await cp.messaging.bus.publish(subjects.policyViolation('acme'), violation('bounded'), {
      msgId: 'm'.repeat(MAX_ID_LENGTH),
    });
    const audited = await eventually(
      () => cp.call('GET', '/v1/audit?action=policy.evaluate', { key }),
      (r) => r.body.length === 1,
      1_000,
    );
    expect(audited.body[0].metadata.message).toBe('bounded');
    expect(cp.plane.processor.stats.rejected).toBe(1);
  });

  it('refuses, at once, an announced envelope whose time has more digits of a second than a key may hold, and goes on', async () => {
    const fraction = '7'.repeat(6_000);
    const opened = {
      tenant_id: 'acme',
      envelope_id: randomUUID(),
      execution_id: 'x',
      budget_id: budgetId,
      status: 'AUTHORIZED',
      source: 'proxy:pod-a',
      occurred_at: new Date().toISOString().replace('Z', `${fraction}Z`),
    };
    await cp.messaging.bus.publish(subjects.envelopeCreated('acme'), opened, { msgId: randomUUID() });
    const event = { ...usageEvent(randomUUID(), 3), timestamp: `2026-03-01T00:00:00.${fraction}Z` };
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    const good = usageEvent(randomUUID(), 7);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), good, { msgId: good.event_id });
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 1 && s.rejected === 2,
      1_000,
    );
    expect(await usage()).toMatchObject({ tokens_input: 7, llm_calls: 1 });
    expect((await cp.call('GET', `/v1/envelopes/${opened.envelope_id}`, { key })).status).toBe(404);
  });

  it('refuses, at once, a usage event whose model, event type or source is past its bound, and goes on', async () => {
    const long = 'm'.repeat(4_000);
    const oversized = [
      { ...usageEvent(randomUUID(), 1), model: long },
      { ...usageEvent(randomUUID(), 1), event_type: `llm.${long}` },
      { ...usageEvent(randomUUID(), 1), source: `proxy:${long}` },
    ];
    for (const event of oversized)
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    const good = usageEvent(randomUUID(), 7);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), good, { msgId: good.event_id });
    // Each retried in place would hold every tenant's events behind it for seconds.
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 1 && s.rejected === oversized.length,
      1_000,
    );
    expect(await usage()).toMatchObject({ tokens_input: 7, llm_calls: 1 });
    for (const event of oversized)
      expect((await cp.call('GET', `/v1/envelopes/${event.envelope_id}`, { key })).status).toBe(404);
  });

  it('refuses, at once, a denial with a field past its bound, auditing nothing of it, and goes on', async () => {
    const violation = (fields: Record<string, unknown>) => ({
      tenant_id: 'acme',
      policy_id: 'p1',
      rule_id: null,
      denied_action: 'tool:shell',
      decision: 'DENY',
      envelope_id: null,
      message: 'denied',
      occurred_at: new Date().toISOString(),
      source: 'proxy:pod-a',
      ...fields,
    });
    const long = 'x'.repeat(5_000);
    const oversized = [
      { source: `proxy:${long}` },
      { message: 'x'.repeat(900_000) },
      { denied_action: `tool:${long}` },
      { policy_id: long },
      { rule_id: long },
      { decision: long },
      { envelope_id: long },
    ];
    for (const fields of oversized)
      await cp.messaging.bus.publish(subjects.policyViolation('acme'), violation(fields), { msgId: randomUUID() });
    await cp.messaging.bus.publish(subjects.policyViolation('acme'), violation({ message: 'bounded' }), {
      msgId: randomUUID(),
    });
    const audited = await eventually(
      () => cp.call('GET', '/v1/audit?action=policy.evaluate', { key }),
      (r) => r.body.length === 1,
      1_000,
    );
    expect(audited.body[0].metadata.message).toBe('bounded');
    expect(cp.plane.processor.stats.rejected).toBe(oversized.length);
  });

  it('charges a call that cost under half a micro-dollar one micro-dollar, never nothing, priced by the proxy or here', async () => {
    const envelopeId = randomUUID();
    // A 20-token embedding: $0.0000004 as the proxy priced it, and unpriced (priced here).
    const priced = Array.from({ length: 50 }, () => ({ ...usageEvent(envelopeId, 20), cost_usd: 4e-7 }));
    const unpriced = Array.from({ length: 50 }, () => ({
      ...usageEvent(envelopeId, 20),
      cost_usd: null,
      model: 'text-embedding-3-small',
    }));
    for (const event of [...priced, ...unpriced]) {
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 100,
    );
    const { cost } = (await cp.plane.storage.read.envelopes.get('acme', envelopeId))!;
    expect(cost.cost_micros).toBe(100);
  });

  it("keeps an envelope's costs by model for its first 63 models, and those of every later one together as other", async () => {
    const envelopeId = randomUUID();
    const models = Array.from({ length: MAX_MODELS_PER_ENVELOPE + 6 }, (_, i) => `model-${i}`);
    // The first model again after the cut: still its own entry.
    const charged = [...models, models[0]!];
    for (const model of charged) {
      const event = { ...usageEvent(envelopeId, 2), model };
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === charged.length,
    );
    // Served over gRPC (cost_summary.model_costs): read here as stored.
    const { cost } = (await cp.plane.storage.read.envelopes.get('acme', envelopeId))!;
    expect(cost.model_costs).toHaveLength(MAX_MODELS_PER_ENVELOPE);
    expect(cost.model_costs.map((m) => m.model_id)).toEqual([
      ...models.slice(0, MAX_MODELS_PER_ENVELOPE - 1),
      OTHER_MODELS,
    ]);
    expect(cost.model_costs[0]).toMatchObject({ call_count: 2, input_tokens: 4 });
    expect(cost.model_costs.at(-1)).toMatchObject({ call_count: 7, input_tokens: 14 });
    expect(cost).toMatchObject({ llm_calls: charged.length, tokens_input: 2 * charged.length });
  });

  it('refuses, at once, an opening or an ending whose kept text is past its bound, and goes on', async () => {
    const envelopeId = randomUUID();
    const opened = (fields: Record<string, unknown>) => ({
      tenant_id: 'acme',
      envelope_id: randomUUID(),
      execution_id: 'x',
      budget_id: budgetId,
      status: 'AUTHORIZED',
      source: 'proxy:pod-a',
      occurred_at: new Date().toISOString(),
      ...fields,
    });
    const long = 'x'.repeat(10_000);
    const refusedOpenings = [opened({ adapter_type: long }), opened({ source: `proxy:${long}` })];
    for (const data of refusedOpenings)
      await cp.messaging.bus.publish(subjects.envelopeCreated('acme'), data, { msgId: randomUUID() });
    await cp.messaging.bus.publish(subjects.envelopeCreated('acme'), opened({ envelope_id: envelopeId }), {
      msgId: randomUUID(),
    });
    // The openings and the endings are applied by consumers of their own: the envelope first.
    await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.status === 200,
      5_000,
    );
    const ended = (reason: string) => ({
      tenant_id: 'acme',
      envelope_id: envelopeId,
      execution_id: 'x',
      budget_id: budgetId,
      status: 'POLICY_VIOLATION',
      reason,
      force: true,
      occurred_at: new Date().toISOString(),
    });
    await cp.messaging.bus.publish(subjects.envelopeTerminated('acme'), ended(long), { msgId: randomUUID() });
    await cp.messaging.bus.publish(subjects.envelopeTerminated('acme'), ended('denied'), { msgId: randomUUID() });
    const envelope = await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.status === 200 && r.body.termination_reason === 'policy_violation',
      3_000,
    );
    expect(envelope.body.status_reason).toBe('denied');
    expect(cp.plane.processor.stats.rejected).toBe(3);
    for (const data of refusedOpenings)
      expect((await cp.call('GET', `/v1/envelopes/${data.envelope_id}`, { key })).status).toBe(404);
  });

  it('lists the envelopes proxies opened at times written with different offsets in time order', async () => {
    const now = Date.now();
    // Oldest first; by text the first sorts highest (9 hours east) and the last lowest (8 west).
    const openings = [
      { minutesAgo: 3, offset: 540 },
      { minutesAgo: 2, offset: 0 },
      { minutesAgo: 1, offset: -480 },
    ].map(({ minutesAgo, offset }) => ({
      tenant_id: 'acme',
      envelope_id: randomUUID(),
      execution_id: randomUUID(),
      budget_id: budgetId,
      status: 'AUTHORIZED',
      source: 'proxy:pod-a',
      occurred_at: withOffset(now - minutesAgo * 60_000, offset),
    }));
    for (const opened of openings)
      await cp.messaging.bus.publish(subjects.envelopeCreated('acme'), opened, { msgId: opened.envelope_id });
    const ids = new Set<string>(openings.map((o) => o.envelope_id));
    const traces = await eventually(
      async () =>
        (
          (await cp.call('GET', '/api/v1/traces?limit=100', { key })).body.traces as Array<Record<string, string>>
        ).filter((t) => ids.has(t.trace_id!)),
      (listed) => listed.length === 3,
    );
    expect(traces.map((t) => [t.trace_id, t.created_at])).toEqual(
      openings.map((o) => [o.envelope_id, new Date(Date.parse(o.occurred_at)).toISOString()]).reverse(),
    );
  });

  it('opens an envelope with its own id as execution when the execution a proxy names is not an id', async () => {
    const long = 'e'.repeat(MAX_ID_LENGTH + 1);
    const [fromEvent, fromEmpty, fromOpening, fromEnding] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const [envelopeId, executionId] of [
      [fromEvent, long],
      [fromEmpty, ''],
    ] as const) {
      const event = { ...usageEvent(envelopeId, 1), payload: { execution_id: executionId } };
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    const envelope = (envelopeId: string, status: string) => ({
      tenant_id: 'acme',
      envelope_id: envelopeId,
      execution_id: long,
      budget_id: budgetId,
      status,
      source: 'proxy:pod-a',
      reason: 'cut off',
      occurred_at: new Date().toISOString(),
    });
    await cp.messaging.bus.publish(subjects.envelopeCreated('acme'), envelope(fromOpening, 'AUTHORIZED'), {
      msgId: fromOpening,
    });
    await cp.messaging.bus.publish(subjects.envelopeTerminated('acme'), envelope(fromEnding, 'BUDGET_EXCEEDED'), {
      msgId: fromEnding,
    });
    const read = (envelopeId: string) => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key });
    await eventually(
      () => read(fromEnding),
      (r) => r.status === 200,
    );
    await eventually(usage, (u) => u.llm_calls === 2);
    const states = {
      [fromEvent]: 'RUNNING',
      [fromEmpty]: 'RUNNING',
      [fromOpening]: 'AUTHORIZED',
      [fromEnding]: 'TERMINATED',
    };
    for (const [envelopeId, state] of Object.entries(states))
      expect((await read(envelopeId)).body).toMatchObject({ execution_id: envelopeId, state });
    expect(cp.plane.processor.stats.rejected).toBe(0);
  });

  it('ends, when the budget runs out, an envelope whose id starts outside the Basic Multilingual Plane', async () => {
    const envelopeId = `😀-${randomUUID()}`;
    for (const input of [600_000, 600_000]) {
      const event = usageEvent(envelopeId, input);
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    await eventually(usage, (u) => u.llm_calls === 2);
    const envelope = await cp.call('GET', `/v1/envelopes/${encodeURIComponent(envelopeId)}`, { key });
    expect(envelope.body).toMatchObject({
      envelope_id: envelopeId,
      state: 'TERMINATED',
      termination_reason: 'budget_exceeded',
    });
    const listed = await cp.call('GET', '/v1/envelopes', { key });
    expect(listed.body.map((e: { envelope_id: string }) => e.envelope_id)).toContain(envelopeId);
  });

  it("applies a proxy's call, pause or ending to a named envelope only when the proxy charges the envelope's budget", async () => {
    const other = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'other team', type: 'token', limits: { max_tokens: 1_000_000 }, period: 'total' },
    });
    const otherBudget = other.body.budget_id as string;
    const made = await cp.call('POST', '/v1/envelopes', {
      key,
      body: {
        tenant_id: 'acme',
        budget_id: budgetId,
        adapter_type: 'langchain',
        governance_context: { token_limit: 100 },
      },
    });
    const envelopeId = made.body.envelope_id as string;
    // A sidecar bound to another budget of the tenant, whose agent named this envelope's id.
    const foreign = { ...usageEvent(envelopeId, 500), budget_id: otherBudget, source: 'proxy:pod-b' };
    const anomaly = {
      ...usageEvent(envelopeId, 0),
      budget_id: otherBudget,
      source: 'proxy:pod-b',
      event_type: 'immune.anomaly',
      payload: {
        kind: 'call_rate',
        count: 40,
        baseline: 3,
        z: 12,
        interval_start: new Date().toISOString(),
        action: 'pause',
      },
    };
    const ended = {
      tenant_id: 'acme',
      envelope_id: envelopeId,
      execution_id: envelopeId,
      budget_id: otherBudget,
      status: 'POLICY_VIOLATION',
      reason: 'denied',
      force: true,
      occurred_at: new Date().toISOString(),
    };
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), foreign, { msgId: foreign.event_id });
    await cp.messaging.bus.publish(subjects.event('acme', 'immune.anomaly'), anomaly, { msgId: anomaly.event_id });
    await cp.messaging.bus.publish(subjects.envelopeTerminated('acme'), ended, { msgId: randomUUID() });
    const counted = (claim: string) => new RegExp(`svc_envelope_foreign_claims_total\\{claim="${claim}"\\} (\\d+)`);
    const metrics = await eventually(
      async () => (await fetch(`${cp.url}/metrics`)).text(),
      (text) => counted('termination').test(text) && counted('pause').test(text),
    );
    expect(metrics).toMatch(counted('usage'));
    expect(metrics.match(counted('usage'))?.[1]).toBe('2');
    // The calls were spent: they charge the budget their sidecar charged, not the envelope's.
    const otherUsage = await cp.call('GET', `/v1/budgets/${otherBudget}/usage`, { key });
    expect(otherUsage.body).toMatchObject({ tokens_input: 500, llm_calls: 1 });
    expect(await usage()).toMatchObject({ tokens_input: 0, llm_calls: 0 });
    const untouched = await cp.call('GET', `/v1/envelopes/${envelopeId}`, { key });
    expect(untouched.body).toMatchObject({ state: 'AUTHORIZED', termination_reason: null });
    expect(untouched.body.cost_summary).toMatchObject({ tokens_input: 0, llm_calls: 0 });

    // Its own sidecar's calls count toward it, up to its limit.
    for (const input of [60, 60]) {
      const own = usageEvent(envelopeId, input);
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), own, { msgId: own.event_id });
    }
    const ending = await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.body.state === 'TERMINATED',
    );
    expect(ending.body).toMatchObject({
      termination_reason: 'budget_exceeded',
      status_reason: 'envelope token_limit 100 reached',
    });
    expect(ending.body.cost_summary).toMatchObject({ tokens_input: 120, llm_calls: 2 });
  });

  it('applies a batch as its events one by one: replays once, usage summed, envelopes ended at 100 %, ledger applied', async () => {
    const period = (await cp.plane.storage.read.budgets.get('acme', budgetId))!.usage.period_start;
    await cp.plane.storage.withTransaction((tx) =>
      tx.leases.addSpend('acme', budgetId, period, 'reported', { tokens: 2_000_000, micros: 0 }),
    );
    // Held back so that all of it arrives as one batch.
    await cp.plane.processor.stop();
    const envelopes = [randomUUID(), randomUUID(), randomUUID()];
    const events = Array.from({ length: 12 }, (_, i) => usageEvent(envelopes[i % 3]!, 100_000));
    const replayed = { ...events[4]!, envelope_id: randomUUID() };
    for (const event of [...events, replayed])
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: randomUUID() });
    await cp.plane.processor.start({ batchSize: 512, maxWaitMs: 200 });
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied + s.duplicates === 13,
    );
    expect(cp.plane.processor.stats).toMatchObject({ applied: 12, duplicates: 1, rejected: 0 });
    // Events after the limit was reached were still spent: they count.
    expect(await usage()).toMatchObject({ tokens_input: 1_200_000, llm_calls: 12 });
    for (const envelopeId of envelopes) {
      const envelope = await cp.call('GET', `/v1/envelopes/${envelopeId}`, { key });
      expect(envelope.body).toMatchObject({ state: 'TERMINATED', termination_reason: 'budget_exceeded' });
      const stored = await cp.plane.storage.read.envelopes.get('acme', envelopeId);
      expect(stored?.cost).toMatchObject({ tokens_input: 400_000, llm_calls: 4 });
    }
    expect((await cp.call('GET', `/v1/envelopes/${replayed.envelope_id}`, { key })).status).toBe(404);
    expect(await cp.plane.storage.read.leases.pendingSpend('acme', budgetId, period)).toEqual({
      tokens: 800_000,
      micros: 0,
    });
  });

  it('applies a batch whose transaction ran and then lost its store, once, when the store is back', async () => {
    await cp.plane.processor.stop();
    const envelopeId = randomUUID();
    for (let i = 0; i < 5; i++)
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), usageEvent(envelopeId, 100), {
        msgId: randomUUID(),
      });
    const storage = cp.plane.storage;
    const transaction = storage.withTransaction.bind(storage);
    let lost = 1;
    // The batch's changes run and are then given up, as when the connection dies before the commit.
    storage.withTransaction = (fn) =>
      lost-- > 0
        ? transaction(async (tx) => {
            await fn(tx);
            throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
          })
        : transaction(fn);
    await cp.plane.processor.start({ batchSize: 512, maxWaitMs: 200 });
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 5,
    );
    expect(lost).toBeLessThan(0);
    expect(cp.plane.processor.stats).toMatchObject({ applied: 5, duplicates: 0, rejected: 0 });
    expect(await usage()).toMatchObject({ tokens_input: 500, llm_calls: 5 });
  });

  it("tells the proxies of a budget's change once per batch, not once per event", async () => {
    const push = vi.spyOn(StatePublisher.prototype, 'push');
    await cp.plane.processor.stop();
    const envelopes = [randomUUID(), randomUUID()];
    for (let i = 0; i < 20; i++) {
      const event = usageEvent(envelopes[i % 2]!, 10);
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    await cp.plane.processor.start({ batchSize: 512, maxWaitMs: 200 });
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === 20,
    );
    const told = push.mock.calls
      .flatMap(([changes]) => changes)
      .filter((change) => change.kind === 'budget' && change.budgetId === budgetId);
    expect(told.length).toBeGreaterThan(0);
    expect(told.length).toBeLessThanOrEqual(cp.plane.processor.stats.batches);
    push.mockRestore();
  });

  it("goes on applying a budget's proxy events, and answering its leases, once its spend is past every total", async () => {
    // Each charged at the largest total: 1,024 of them make 2^63, past a PostgreSQL bigint.
    const costly = Array.from({ length: 1_100 }, () => ({ ...usageEvent(randomUUID(), 1), cost_usd: 1e300 }));
    await cp.plane.processor.stop();
    for (const event of costly)
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    await cp.plane.processor.start({ batchSize: 512, maxWaitMs: 200 });
    // Three batches of hundreds of events: seconds on a busy machine.
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.applied === costly.length,
      20_000,
    );
    const after = usageEvent(randomUUID(), 5);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), after, { msgId: after.event_id });
    await eventually(usage, (u) => u.llm_calls === costly.length + 1, 5_000);
    expect(cp.plane.processor.stats).toMatchObject({ rejected: 0 });
    expect((await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key })).body).toMatchObject({
      cost_usd: MAX_TOTAL_USD,
    });
    for (let report_seq = 1; report_seq <= 3; report_seq++) {
      const grant = await cp.messaging.requests.request(
        syncSubjects.lease('acme'),
        {
          tenant_id: 'acme',
          budget_id: budgetId,
          holder: 'pod-a',
          want_tokens: 1_000,
          want_micros: 0,
          spent_tokens: MAX_TOTAL,
          spent_micros: MAX_TOTAL,
          report_seq,
        },
        1_000,
      );
      expect(LeaseGrantSchema.parse(grant)).toMatchObject({ tokens: 0, micros: null });
    }
  });
});
