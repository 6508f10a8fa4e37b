import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BudgetStateSchema,
  HoldStateSchema,
  keys,
  LeaseGrantSchema,
  RulesetSnapshotSchema,
  syncSubjects,
  TerminateSignalSchema,
  type TerminateSignal,
} from '../../core/sync/contract.ts';
import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { eventually, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';

let cp: RunningControlPlane;
let key: string;
beforeEach(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
});
afterEach(async () => cp.close());

async function costBudget(max: number): Promise<string> {
  const res = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name: 'b', type: 'cost', limits: { max_cost_usd: max } },
  });
  return res.body.budget_id as string;
}

function usageEvent(budgetId: string, envelopeId: string, costUsd: number, eventId = randomUUID()) {
  return {
    event_id: eventId,
    tenant_id: 'acme',
    envelope_id: envelopeId,
    budget_id: budgetId,
    event_type: 'llm.call',
    timestamp: new Date().toISOString(),
    tokens: { input: 10, output: 5 },
    model: 'gpt-4o',
    cost_usd: costUsd,
    payload: { execution_id: 'exec-1' },
    source: 'proxy:pod-a',
  };
}

describe('state pushed to proxies', () => {
  it('writes the ruleset snapshot when a policy is created', async () => {
    const bucket = await cp.messaging.keyValue.open('svc_rulesets');
    const snapshot = async () => {
      const entry = await bucket.get(keys.ruleset('acme'));
      return entry === null || entry === undefined ? null : RulesetSnapshotSchema.parse(entry.value);
    };
    const before = (await eventually(snapshot, (s) => s !== null))!;
    expect(before.policies).toHaveLength(0);
    const policy = await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'deny-gpt4', rules: [{ action: 'llm:gpt-4*', effect: 'deny' }] },
    });
    // Pushes run in the background after the commit: waited for, not assumed done with the answer.
    const after = (await eventually(snapshot, (s) => s !== null && s.version > before.version))!;
    expect(after.version).toBe(before.version + 1);
    expect(after.policies.map((p) => p.policy_id)).toEqual([policy.body.policy_id]);
  });

  it('writes budget state on creation and after usage', async () => {
    const budgetId = await costBudget(2);
    const bucket = await cp.messaging.keyValue.open('svc_budgets');
    const state = async () => {
      const entry = await bucket.get(keys.budget('acme', budgetId));
      return entry === null || entry === undefined ? null : BudgetStateSchema.parse(entry.value);
    };
    expect(await eventually(state, (s) => s !== null)).toMatchObject({
      status: 'active',
      used_micros: 0,
      unleased_micros: 2_000_000,
    });
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    await cp.call('POST', `/v1/envelopes/${env.body.envelope_id}/events`, {
      key,
      body: { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: 0.5 },
    });
    expect(await eventually(state, (s) => s?.used_micros === 500_000)).toMatchObject({
      used_micros: 500_000,
      unleased_micros: 1_500_000,
    });
  });
});

describe('usage events on the bus', () => {
  it('name the budget a REST-recorded llm.call or tool.call was charged to', async () => {
    const budgetId = await costBudget(5);
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    for (const eventType of ['llm.call', 'tool.call'])
      await cp.call('POST', `/v1/envelopes/${String(env.body.envelope_id)}/events`, {
        key,
        body: { event_type: eventType, timestamp: new Date().toISOString(), cost_usd: 0.1 },
      });
    const published = await eventually(
      () => cp.published.filter((m) => m.subject.startsWith('svc.acme.events.')),
      (m) => m.length === 2,
    );
    expect(published.map((m) => [m.subject, (m.data as { budget_id: unknown }).budget_id])).toEqual([
      ['svc.acme.events.llm.call', budgetId],
      ['svc.acme.events.tool.call', budgetId],
    ]);
    const stored = (await cp.call('GET', '/v1/events', { key })).body as Array<{ budget_id: unknown }>;
    expect(stored.map((e) => e.budget_id)).toEqual([budgetId, budgetId]);
  });
});

describe('leases over request-reply', () => {
  it('grants from the remainder and refuses a body naming another tenant', async () => {
    const budgetId = await costBudget(1);
    const ask = (tenant: string, holder: string) =>
      cp.messaging.requests.request(
        syncSubjects.lease('acme'),
        { tenant_id: tenant, budget_id: budgetId, holder, want_tokens: 0, want_micros: 700_000 },
        1000,
      );
    expect(LeaseGrantSchema.parse(await ask('acme', 'a')).micros).toBe(700_000);
    expect(LeaseGrantSchema.parse(await ask('acme', 'b')).micros).toBe(300_000);
    await expect(ask('other', 'c')).rejects.toMatchObject({ code: 'SVC-SYS-9004' });
  });

  it('refuses a holder or lease id longer than an id may be, naming it, and records nothing of it', async () => {
    const budgetId = await costBudget(1);
    const ask = (holder: string, leaseId: string | null) =>
      cp.messaging.requests.request(
        syncSubjects.lease('acme'),
        {
          tenant_id: 'acme',
          budget_id: budgetId,
          holder,
          lease_id: leaseId,
          want_tokens: 0,
          want_micros: 100_000,
          spent_micros: 50_000,
          report_seq: 1,
        },
        1000,
      );
    for (const [holder, leaseId, field] of [
      ['h'.repeat(3_000), null, 'holder'],
      ['h', 'l'.repeat(3_000), 'lease_id'],
    ] as const)
      await expect(ask(holder, leaseId)).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        message: expect.stringContaining(`${field}: `),
      });
    const usage = await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key });
    expect(usage.body.cost_usd).toBe(0);
  });
});

describe('event processor', () => {
  it('applies proxy events once, opening the envelope it has not seen', async () => {
    const budgetId = await costBudget(10);
    const envelopeId = randomUUID();
    const event = usageEvent(budgetId, envelopeId, 0.25);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    await cp.messaging.bus.publish(
      subjects.event('acme', 'llm.call'),
      { ...event },
      { msgId: `${event.event_id}-replay` },
    );
    const env = await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.status === 200 && r.body.cost_summary.llm_calls === 1,
    );
    expect(env.body).toMatchObject({
      execution_id: 'exec-1',
      budget_id: budgetId,
      state: 'RUNNING',
      cost_summary: { cost_usd: 0.25, tokens_total: 15 },
    });
    await eventually(
      () => cp.plane.processor.stats,
      (s) => s.duplicates === 1,
    );
    const usage = await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key });
    expect(usage.body.cost_usd).toBe(0.25);
  });

  it("charges a proxy's call to the budget its lease came from, not to the budget of an envelope the agent named", async () => {
    const bound = await costBudget(10);
    const other = await costBudget(0.4);
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: other, adapter_type: 'custom' } });
    const envelopeId = env.body.envelope_id as string;
    const event = usageEvent(bound, envelopeId, 0.5);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    await eventually(
      () => cp.call('GET', `/v1/budgets/${bound}/usage`, { key }),
      (r) => r.body.cost_usd === 0.5,
    );
    const untouched = await cp.call('GET', `/v1/budgets/${other}`, { key });
    expect(untouched.body).toMatchObject({ status: 'active', usage: { cost_usd: 0 } });
    // Nor to the envelope: a sidecar of another budget is not its execution's.
    const summary = await cp.call('GET', `/v1/envelopes/${envelopeId}`, { key });
    expect(summary.body.cost_summary).toMatchObject({ cost_usd: 0, llm_calls: 0 });
  });

  it('stores an envelope a proxy announces', async () => {
    const budgetId = await costBudget(10);
    const envelopeId = randomUUID();
    await cp.messaging.bus.publish(
      subjects.envelopeCreated('acme'),
      {
        tenant_id: 'acme',
        envelope_id: envelopeId,
        execution_id: 'exec-9',
        budget_id: budgetId,
        status: 'AUTHORIZED',
        source: 'proxy:pod-a',
        occurred_at: new Date().toISOString(),
      },
      { msgId: `open-${envelopeId}` },
    );
    const env = await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.status === 200,
    );
    expect(env.body).toMatchObject({ state: 'AUTHORIZED', execution_id: 'exec-9', adapter_type: 'proxy' });
  });

  it('signals the termination of every envelope on a budget the proxies exhaust', async () => {
    const signals: TerminateSignal[] = [];
    await cp.messaging.signals.subscribeSignals(syncSubjects.terminate('acme'), (data) => {
      signals.push(TerminateSignalSchema.parse(data));
    });
    const budgetId = await costBudget(1);
    const [a, b] = [randomUUID(), randomUUID()];
    for (const [envelopeId, cost] of [
      [a, 0.6],
      [b, 0.6],
    ] as const) {
      const event = usageEvent(budgetId, envelopeId, cost);
      await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    }
    await eventually(
      () => signals.map((s) => s.envelope_id).sort(),
      (ids) => ids.length === 2,
    );
    expect(signals.map((s) => s.envelope_id).sort()).toEqual([a, b].sort());
    expect(signals.every((s) => s.force && s.budget_id === budgetId)).toBe(true);
    const env = await cp.call('GET', `/v1/envelopes/${a}`, { key });
    expect(env.body).toMatchObject({ state: 'TERMINATED', termination_reason: 'budget_exceeded' });
  });

  it('signals a termination made over REST', async () => {
    const signals: TerminateSignal[] = [];
    await cp.messaging.signals.subscribeSignals(syncSubjects.terminate('acme'), (data) => {
      signals.push(TerminateSignalSchema.parse(data));
    });
    const budgetId = await costBudget(1);
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    await cp.call('POST', `/v1/envelopes/${env.body.envelope_id}/terminate`, {
      key,
      body: { reason: 'stop', force: true },
    });
    await eventually(
      () => signals,
      (s) => s.length === 1,
    );
    expect(signals[0]).toMatchObject({ envelope_id: env.body.envelope_id, reason: 'stop', force: true });
  });
});

describe('envelope holds pushed to proxies (svc_holds)', () => {
  async function holdsOf(control: RunningControlPlane, envelopeId: string) {
    const bucket = await control.messaging.keyValue.open('svc_holds');
    return {
      bucket,
      read: async () => {
        const entry = await bucket.get(keys.hold('acme', envelopeId));
        return entry === undefined ? null : HoldStateSchema.parse(entry.value);
      },
    };
  }

  it('keeps a paused envelope held, lifts the hold on resumption and holds an ended one', async () => {
    const budgetId = await costBudget(1);
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    const envelopeId = env.body.envelope_id as string;
    const { read } = await holdsOf(cp, envelopeId);
    // Running envelopes the proxies never held leave nothing in the bucket.
    await cp.call('POST', `/v1/envelopes/${envelopeId}/status`, { key, body: { status: 'RUNNING' } });
    await new Promise((r) => setTimeout(r, 100));
    expect(await read()).toBeNull();
    await cp.call('POST', `/v1/envelopes/${envelopeId}/status`, { key, body: { status: 'PAUSED', reason: 'look' } });
    expect(await eventually(read, (h) => h?.status === 'PAUSED')).toMatchObject({
      tenant_id: 'acme',
      envelope_id: envelopeId,
      execution_id: env.body.execution_id,
      budget_id: budgetId,
      reason: 'look',
    });
    await cp.call('POST', `/v1/envelopes/${envelopeId}/status`, { key, body: { status: 'RUNNING' } });
    await eventually(read, (h) => h?.status === 'RUNNING');
    await cp.call('POST', `/v1/envelopes/${envelopeId}/terminate`, { key, body: { reason: 'stop' } });
    expect(await eventually(read, (h) => h?.status === 'TERMINATED')).toMatchObject({ reason: 'stop' });
  });

  it('writes a pause still in force again when it went missing or grew old, so it never ages out', async () => {
    const refreshing = await startControlPlane({ state_refresh_seconds: 1, hold_max_age_seconds: 600 });
    try {
      const admin = await tenantWithKey(refreshing, 'acme');
      const budget = await refreshing.call('POST', '/v1/budgets', {
        key: admin,
        body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1 } },
      });
      const env = await refreshing.call('POST', '/v1/envelopes', {
        key: admin,
        body: { budget_id: budget.body.budget_id, adapter_type: 'custom' },
      });
      const envelopeId = env.body.envelope_id as string;
      await refreshing.call('POST', `/v1/envelopes/${envelopeId}/status`, {
        key: admin,
        body: { status: 'PAUSED', reason: 'look' },
      });
      const { bucket, read } = await holdsOf(refreshing, envelopeId);
      const first = (await eventually(read, (h) => h?.status === 'PAUSED'))!;
      await bucket.delete(keys.hold('acme', envelopeId));
      await eventually(read, (h) => h?.status === 'PAUSED', 5000);
      // Written 6 minutes ago: more than half of the 10-minute age limit.
      const old = new Date(Date.now() - 360_000).toISOString();
      await bucket.put(keys.hold('acme', envelopeId), { ...first, written_at: old });
      const rewritten = (await eventually(read, (h) => h !== null && h.written_at !== old, 5000))!;
      expect(Date.parse(rewritten.written_at)).toBeGreaterThan(Date.parse(first.written_at) - 1);
      expect(rewritten.status).toBe('PAUSED');
    } finally {
      await refreshing.close();
    }
  });
});

describe('GET /v1/events', () => {
  it('lists stored events newest first, by envelope and event type, within the tenant', async () => {
    const budgetId = await costBudget(10);
    const [a, b] = [randomUUID(), randomUUID()];
    for (const [envelopeId, type] of [
      [a, 'llm.call'],
      [a, 'tool.search'],
      [b, 'llm.call'],
    ] as const) {
      const event = { ...usageEvent(budgetId, envelopeId, 0.01), event_type: type };
      await cp.messaging.bus.publish(subjects.event('acme', type), event, { msgId: event.event_id });
    }
    await eventually(
      () => cp.plane.processor.stats.applied,
      (n) => n === 3,
    );
    const all = await cp.call('GET', '/v1/events', { key });
    expect(
      all.body.map(
        (e: { envelope_id: string; event_type: string }) => `${e.envelope_id === a ? 'a' : 'b'}:${e.event_type}`,
      ),
    ).toEqual(['b:llm.call', 'a:tool.search', 'a:llm.call']);
    const ofA = await cp.call('GET', `/v1/events?envelopeId=${a}&eventType=llm.*`, { key });
    expect(ofA.body).toHaveLength(1);
    expect(ofA.body[0]).toMatchObject({
      envelope_id: a,
      event_type: 'llm.call',
      cost_usd: 0.01,
      source: 'proxy:pod-a',
    });
    const otherKey = await tenantWithKey(cp, 'other');
    expect((await cp.call('GET', '/v1/events', { key: otherKey })).body).toEqual([]);
  });
});

describe('terminations announced by a proxy', () => {
  it('ends the envelope centrally and signals every proxy, once', async () => {
    const signals: TerminateSignal[] = [];
    await cp.messaging.signals.subscribeSignals(syncSubjects.terminate('acme'), (data) => {
      signals.push(TerminateSignalSchema.parse(data));
    });
    const budgetId = await costBudget(10);
    const envelopeId = randomUUID();
    const event = usageEvent(budgetId, envelopeId, 0.01);
    await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), event, { msgId: event.event_id });
    await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.status === 200 && r.body.state === 'RUNNING',
    );
    const ended = {
      tenant_id: 'acme',
      envelope_id: envelopeId,
      execution_id: 'exec-1',
      budget_id: budgetId,
      status: 'BUDGET_EXCEEDED',
      reason: 'lease exhausted mid-stream',
      force: true,
      occurred_at: new Date().toISOString(),
    };
    await cp.messaging.bus.publish(subjects.envelopeTerminated('acme'), ended, {
      msgId: msgIds.proxyEnded('acme', envelopeId),
    });
    const env = await eventually(
      () => cp.call('GET', `/v1/envelopes/${envelopeId}`, { key }),
      (r) => r.body.state === 'TERMINATED',
    );
    expect(env.body).toMatchObject({
      termination_reason: 'budget_exceeded',
      status_reason: 'lease exhausted mid-stream',
    });
    await eventually(
      () => signals.length,
      (n) => n >= 1,
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(signals.filter((s) => s.envelope_id === envelopeId)).toHaveLength(1);
    const audit = await cp.call('GET', '/v1/audit?action=envelope.terminate', { key });
    expect(audit.body[0]).toMatchObject({ actor: { type: 'proxy' }, resource: { id: envelopeId } });
  });
});

describe('policy denials at proxies', () => {
  it('enter the audit log once, and the control plane does not audit its own denials twice', async () => {
    const violation = {
      tenant_id: 'acme',
      policy_id: 'p1',
      rule_id: 'rule-1',
      denied_action: 'llm:gpt-4o',
      decision: 'DENY',
      envelope_id: 'e1',
      message: 'denied',
      occurred_at: new Date().toISOString(),
      source: 'proxy:pod-a',
    };
    await cp.messaging.bus.publish(subjects.policyViolation('acme'), violation, { msgId: 'v-1' });
    const audited = await eventually(
      () => cp.call('GET', '/v1/audit?action=policy.evaluate', { key }),
      (r) => r.body.length === 1,
    );
    expect(audited.body[0]).toMatchObject({
      actor: { type: 'proxy', id: 'proxy:pod-a' },
      resource: { type: 'envelope', id: 'e1' },
      result: 'deny',
      metadata: { action: 'llm:gpt-4o' },
    });

    await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'no-tools', rules: [{ action: 'tool:*', effect: 'deny' }] },
    });
    await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'tool:shell', context: {} } });
    await eventually(
      () => cp.published.filter((m) => m.subject === 'svc.acme.policies.violation').length,
      (n) => n === 2,
    );
    await new Promise((r) => setTimeout(r, 200));
    const all = await cp.call('GET', '/v1/audit?action=policy.evaluate', { key });
    expect(all.body.map((r: { actor: { type: string } }) => r.actor.type)).toEqual(['api_key', 'proxy']);
  });

  it("name no policy when none decided, as the control plane's own default denials do", async () => {
    await cp.messaging.bus.publish(
      subjects.policyViolation('acme'),
      {
        tenant_id: 'acme',
        policy_id: '',
        rule_id: null,
        denied_action: 'tool:mcp',
        decision: 'DENY',
        envelope_id: null,
        message: 'tools[0].allowed_tools: a remote MCP server without a tool list',
        occurred_at: new Date().toISOString(),
        source: 'proxy:pod-a',
      },
      { msgId: 'v-unmatched' },
    );
    type Listed = { resource: { id: string } };
    const unmatched = async () =>
      ((await cp.call('GET', '/v1/audit?action=policy.evaluate', { key })).body as Listed[]).find(
        (r) => r.resource.id === 'tool:mcp',
      );
    const record = await eventually(unmatched, (found) => found !== undefined);
    expect(record).toMatchObject({
      actor: { type: 'proxy', id: 'proxy:pod-a' },
      resource: { type: 'action', id: 'tool:mcp' },
      result: 'deny',
      metadata: { action: 'tool:mcp', matched_policy: null, matched_rule: null },
    });
  });
});
