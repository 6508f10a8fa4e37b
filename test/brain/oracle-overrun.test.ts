import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tiktokenLoaded } from '../harness/tiktoken-loaded.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

const HOUR = 3_600_000;
const DAY_START = Date.parse('2026-11-23T00:00:00.000Z');
let now = DAY_START;
let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  // The watch is on, its background round a day apart: the tests run each round themselves.
  cp = await startControlPlane({ oracle_interval_seconds: 86_400 }, undefined, undefined, () => new Date(now));
  key = await tenantWithKey(cp, 'oracleco');
});
afterAll(async () => {
  await cp.close();
});

const overrunSubject = 'svc.oracleco.budgets.overrun_predicted';
const announced = () => cp.published.filter((m) => m.subject === overrunSubject);

async function budgetWithEnvelope(name: string): Promise<{ budgetId: string; envelopeId: string }> {
  const budget = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name, type: 'cost', period: 'daily', limits: { max_cost_usd: 100 }, workflow_id: `wf-${name}` },
  });
  expect(budget.status).toBe(201);
  const envelope = await cp.call('POST', '/v1/envelopes', {
    key,
    body: { budget_id: budget.body.budget_id, adapter_type: 'langchain' },
  });
  expect(envelope.status).toBe(201);
  return { budgetId: budget.body.budget_id as string, envelopeId: envelope.body.envelope_id as string };
}

async function call(envelopeId: string, at: number): Promise<void> {
  const res = await cp.call('POST', `/v1/envelopes/${envelopeId}/events`, {
    key,
    body: {
      event_type: 'llm.call',
      timestamp: new Date(at).toISOString(),
      model: 'gpt-4o-mini',
      tokens: { input: 100, output: 20 },
      cost_usd: 0.5,
    },
  });
  expect(res.status).toBe(202);
}

/** Replays hours [from, to): `perHour(h)` calls of 0.5 USD in hour h, evenly spread, the clock following. */
async function replay(envelopeId: string, perHour: (h: number) => number, from: number, to: number): Promise<void> {
  for (let h = from; h < to; h++) {
    const n = perHour(h);
    for (let i = 0; i < n; i++) await call(envelopeId, DAY_START + h * HOUR + ((i + 0.5) * HOUR) / n);
  }
}

async function spent(budgetId: string, expected: number): Promise<void> {
  await eventually(
    async () => (await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key })).body.cost_usd as number,
    (usd) => Math.abs(usd - expected) < 1e-6,
    10_000,
  );
}

describe('the Oracle on the control plane', () => {
  let accelerating: { budgetId: string; envelopeId: string };
  let steady: { budgetId: string; envelopeId: string };

  it('raises budgets.overrun_predicted for an accelerating workload before it runs over, not for a steady one', async () => {
    accelerating = await budgetWithEnvelope('accelerating');
    steady = await budgetWithEnvelope('steady');
    // Accelerating: 2 calls in the first hour, 2 more every hour after (the limit near hour 13).
    // Steady: 3 calls an hour, 36 USD a day against 100.
    await replay(accelerating.envelopeId, (h) => 2 + 2 * h, 0, 4);
    await replay(steady.envelopeId, () => 3, 0, 4);
    now = DAY_START + 4 * HOUR;
    await spent(accelerating.budgetId, 10);
    await spent(steady.budgetId, 6);
    expect(await cp.plane.overrunWatch.runOnce()).toBe(0);

    await replay(accelerating.envelopeId, (h) => 2 + 2 * h, 4, 6);
    await replay(steady.envelopeId, () => 3, 4, 6);
    now = DAY_START + 6 * HOUR;
    await spent(accelerating.budgetId, 21);
    await spent(steady.budgetId, 9);
    // Switched off for the tenant, the watch passes it over; switched on again, it warns.
    const off = await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key, body: { enabled: false } });
    expect(off.body).toMatchObject({ name: 'oracle_overrun_watch', enabled: false, switchable: true });
    expect(await cp.plane.overrunWatch.runOnce()).toBe(0);
    const on = await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key, body: { enabled: true } });
    expect(on.body).toMatchObject({ enabled: true });
    expect(await cp.plane.overrunWatch.runOnce()).toBe(1);
    const [message] = await eventually(announced, (m) => m.length === 1);
    expect(message?.data).toMatchObject({
      tenant_id: 'oracleco',
      budget_id: accelerating.budgetId,
      budget_name: 'accelerating',
      dimension: 'cost_usd',
      threshold: 0.8,
      limit: 100,
      spent: 21,
      trend: 'accelerating',
    });
    expect((message?.data as { probability: number }).probability).toBeGreaterThanOrEqual(0.8);
    // Announced before the budget ran over: nothing exceeded, not even warned.
    expect(cp.published.some((m) => m.subject.startsWith('svc.oracleco.budgets.exceeded'))).toBe(false);
  });

  it('announces a budget once per period', async () => {
    expect(await cp.plane.overrunWatch.runOnce()).toBe(0);
    expect(announced()).toHaveLength(1);
  });

  it('answers POST /v1/brain/oracle/predict-overrun for a stored budget and for a workload given inline', async () => {
    const high = await cp.call('POST', '/v1/brain/oracle/predict-overrun', {
      key,
      body: { budget_id: accelerating.budgetId },
    });
    expect(high.status).toBe(200);
    expect(high.body).toMatchObject({ budget_id: accelerating.budgetId, dimension: 'cost_usd', trend: 'accelerating' });
    expect(high.body.probability).toBeGreaterThanOrEqual(0.8);
    expect(Date.parse(high.body.expected_exhaustion_at as string)).toBeGreaterThan(now);
    const low = await cp.call('POST', '/v1/brain/oracle/predict-overrun', {
      key,
      body: { budget_id: steady.budgetId },
    });
    expect(low.body).toMatchObject({ trend: 'steady', expected_exhaustion_at: null, sample_size: 18 });
    expect(low.body.probability).toBeLessThan(0.01);
    expect(low.body.expected_spend_at_end).toBeCloseTo(36, 0);

    const inline = await cp.call('POST', '/v1/brain/oracle/predict-overrun', {
      key,
      body: {
        workload: {
          limit: 10,
          spent: 9,
          period_start: '2026-11-23T00:00:00Z',
          period_end: '2026-11-23T02:00:00Z',
          now: '2026-11-23T01:00:00Z',
          calls: Array.from({ length: 18 }, (_, i) => ({
            at: new Date(DAY_START + (i + 0.5) * 200_000).toISOString(),
            amount: 0.5,
          })),
        },
      },
    });
    expect(inline.status).toBe(200);
    expect(inline.body).toMatchObject({ budget_id: null, dimension: 'workload' });
    expect(inline.body.probability).toBeGreaterThan(0.95);
  });

  it('refuses a request naming both or neither, and an unknown budget', async () => {
    const both = await cp.call('POST', '/v1/brain/oracle/predict-overrun', {
      key,
      body: {
        budget_id: steady.budgetId,
        workload: {
          limit: 1,
          spent: 0,
          period_start: '2026-11-23T00:00:00Z',
          period_end: '2026-11-24T00:00:00Z',
          calls: [],
        },
      },
    });
    expect(JSON.stringify(expectSvcError(both, 400, 'SVC-SYS-9002'))).toContain('budget_id');
    expectSvcError(await cp.call('POST', '/v1/brain/oracle/predict-overrun', { key, body: {} }), 400, 'SVC-SYS-9002');
    expectSvcError(
      await cp.call('POST', '/v1/brain/oracle/predict-overrun', {
        key,
        body: { budget_id: '00000000-0000-4000-8000-000000000000' },
      }),
      404,
      'SVC-BUD-3002',
    );
  });
});

describe('POST /v1/costs/predict', () => {
  const predict = (body: Record<string, unknown>) => cp.call('POST', '/v1/costs/predict', { key, body });

  it('counts the input with tiktoken and takes the output length from the recorded calls of the model', async () => {
    const res = await predict({ input_text: 'hello world', model_ids: ['gpt-4o-mini', 'gpt-4.1'] });
    expect(res.status).toBe(200);
    // Counted on the token thread: this event loop, which serves the proxy too in standalone mode, never loads it.
    expect(tiktokenLoaded()).toBe(false);
    expect(res.body).toMatchObject({
      historical_based: true,
      sample_size: 60,
      overrun_probability: null,
      prediction: {
        estimated_input_tokens: 2,
        estimated_output_tokens: 20,
        estimated_total_tokens: 22,
        confidence_level: 'high',
      },
    });
    expect(res.body.prediction.estimated_cost_usd).toBeGreaterThan(0);
    expect(res.body.prediction.estimated_cost_usd_min).toBeLessThanOrEqual(res.body.prediction.estimated_cost_usd);
    // No call of gpt-4.1 recorded: the default output length, low confidence.
    expect(res.body.predictions[1]).toMatchObject({
      model_id: 'gpt-4.1',
      sample_size: 0,
      estimated_output_tokens: 500,
      confidence_level: 'low',
    });
  });

  it("reads a workflow's budgets only, and says how likely they are to run over", async () => {
    const res = await predict({
      estimated_input_tokens: 1000,
      model_ids: ['gpt-4o-mini'],
      workflow_id: 'wf-accelerating',
    });
    expect(res.body).toMatchObject({ sample_size: 42, prediction: { estimated_input_tokens: 1000 } });
    expect(res.body.overrun_probability).toBeGreaterThanOrEqual(0.8);
    const none = await predict({ estimated_input_tokens: 10, model_ids: ['gpt-4o-mini'], use_historical_data: false });
    expect(none.body).toMatchObject({ historical_based: false, sample_size: 0 });
  });

  it('refuses a request without input or models, naming the field', async () => {
    expect(
      JSON.stringify(expectSvcError(await predict({ model_ids: ['gpt-4o-mini'] }), 400, 'SVC-SYS-9002')),
    ).toContain('input_text');
    expectSvcError(await predict({ input_text: 'x', model_ids: [] }), 400, 'SVC-SYS-9002');
  });
});

describe('the Oracle on an envelope', () => {
  async function envelopeWith(governance: Record<string, unknown>): Promise<string> {
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'roomy', type: 'cost', period: 'daily', limits: { max_cost_usd: 1000 } },
    });
    const res = await cp.call('POST', '/v1/envelopes', {
      key,
      body: { budget_id: budget.body.budget_id, adapter_type: 'langchain', governance_context: governance },
    });
    expect(res.status).toBe(201);
    return res.body.envelope_id as string;
  }

  it("predicts an envelope's own limit over its lifetime from its own calls", async () => {
    now = DAY_START + 8 * HOUR;
    const envelopeId = await envelopeWith({ cost_limit_usd: 10, timeout_seconds: 3600 });
    // 0.5 USD calls, one more every five minutes: 1, 2, … 5 calls per five minutes, 7.5 USD in 25 minutes.
    for (let slot = 0; slot < 5; slot++)
      for (let i = 0; i <= slot; i++) await call(envelopeId, now + slot * 300_000 + ((i + 0.5) * 300_000) / (slot + 1));
    now += 25 * 60_000;
    await eventually(
      async () => (await cp.call('GET', `/v1/envelopes/${envelopeId}`, { key })).body.cost_summary.cost_usd as number,
      (usd) => usd >= 7.5,
      10_000,
    );
    const res = await cp.call('POST', '/v1/brain/oracle/predict-overrun', { key, body: { envelope_id: envelopeId } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      envelope_id: envelopeId,
      dimension: 'cost_usd',
      limit: 10,
      period_end: new Date(DAY_START + 9 * HOUR).toISOString(),
    });
    expect(res.body.probability).toBeGreaterThan(0.9);
    expect(Date.parse(res.body.expected_exhaustion_at as string)).toBeLessThan(DAY_START + 9 * HOUR);
  });

  it('has no answer for an envelope without a timeout, and refuses an unknown one', async () => {
    const open = await envelopeWith({ cost_limit_usd: 10 });
    const res = await cp.call('POST', '/v1/brain/oracle/predict-overrun', { key, body: { envelope_id: open } });
    expect(res.body).toMatchObject({ probability: null, method: 'no_period_end', period_end: null });
    expectSvcError(
      await cp.call('POST', '/v1/brain/oracle/predict-overrun', {
        key,
        body: { envelope_id: '00000000-0000-4000-8000-000000000000' },
      }),
      404,
      'SVC-ENV-1001',
    );
  });
});
