import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';

let cp: RunningControlPlane;
let key: string;
beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
});
afterAll(async () => cp.close());

const table = loadPriceTable();
const tokens = { input: 100_000, output: 10_000 };

async function recorded(event: Record<string, unknown>): Promise<number> {
  const budget = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name: 'unknown-models', type: 'cost', limits: { max_cost_usd: 1000 } },
  });
  const envelope = await cp.call('POST', '/v1/envelopes', {
    key,
    body: { tenant_id: 'acme', budget_id: budget.body.budget_id, adapter_type: 'custom' },
  });
  const id = envelope.body.envelope_id as string;
  const res = await cp.call('POST', `/v1/envelopes/${id}/events`, {
    key,
    body: { event_type: 'llm.call', timestamp: new Date().toISOString(), tokens, ...event },
  });
  expect(res.status).toBe(202);
  return (await cp.call('GET', `/v1/envelopes/${id}`, { key })).body.cost_summary.cost_usd as number;
}

describe('REST events of a model missing from the price table', () => {
  it('are priced at the highest known rate of the provider the event names, never at zero', async () => {
    const charged = await recorded({ model: 'claude-unreleased', payload: { provider: 'anthropic' } });
    const expected = cost(table, 'claude-unreleased', { ...tokens, cachedInput: 0 }, 'anthropic').costUsd;
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeCloseTo(expected, 6);
    expect(charged).toBeGreaterThanOrEqual(cost(table, 'claude-3-opus', { ...tokens, cachedInput: 0 }).costUsd);
  });

  it('are priced at the highest rate of the whole table when no provider is named', async () => {
    const charged = await recorded({ model: 'in-house-llm' });
    expect(charged).toBeCloseTo(cost(table, 'in-house-llm', { ...tokens, cachedInput: 0 }).costUsd, 6);
    expect(charged).toBeGreaterThan(await recorded({ model: 'gemini-unreleased', payload: { provider: 'gemini' } }));
  });
});
