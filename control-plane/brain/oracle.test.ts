import { describe, expect, it } from 'vitest';
import { BudgetSchema, type Budget } from '../../core/domain/index.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Readers } from '../storage/storage.ts';
import { Oracle } from './oracle.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const TODAY = Date.parse('2026-11-23T00:00:00.000Z');

function budget(id: string, workflow: string | null): Budget {
  return BudgetSchema.parse({
    budget_id: id,
    tenant_id: 't',
    name: id,
    description: '',
    type: 'cost',
    period: 'daily',
    limits: { max_cost_usd: 100 },
    alerts: [],
    expires_at: null,
    workflow_id: workflow,
    tags: {},
    usage: {
      period_start: new Date(TODAY).toISOString(),
      period_end: new Date(TODAY + DAY).toISOString(),
      tokens_input: 0,
      tokens_output: 0,
      cost_micros: 6_000_000,
      executions: 0,
      llm_calls: 12,
      tool_calls: 0,
      alerts_fired: [],
    },
    created_at: new Date(TODAY - 10 * DAY).toISOString(),
    updated_at: new Date(TODAY).toISOString(),
  });
}

let n = 0;
function event(budgetId: string, at: number, usd: number): StoredEvent {
  n++;
  return {
    event_id: `e-${n}`,
    tenant_id: 't',
    envelope_id: `env-${budgetId}`,
    budget_id: budgetId,
    event_type: 'llm.call',
    timestamp: new Date(at).toISOString(),
    tokens: { input: 10, output: 10 },
    model: 'gpt-4o-mini',
    cost_usd: usd,
    payload: {},
    source: 'rest',
    cost_micros: Math.round(usd * 1e6),
    received_at: new Date(at).toISOString(),
  };
}

function oracle(budgets: Budget[], events: StoredEvent[]): Oracle {
  const newestFirst = [...events].sort((a, b) => Date.parse(b.received_at) - Date.parse(a.received_at));
  const read = {
    events: {
      list: (_tenant: string, _filter: unknown, page?: { pageSize?: number; pageToken?: string | null }) => {
        const from = Number(page?.pageToken ?? 0);
        const size = page?.pageSize ?? 100;
        const items = newestFirst.slice(from, from + size);
        return Promise.resolve({ items, nextPageToken: from + size < newestFirst.length ? String(from + size) : null });
      },
    },
  } as unknown as Readers;
  const lookup = {
    list: () => Promise.resolve(budgets),
    get: (_t: string, id: string) => Promise.resolve(budgets.find((b) => b.budget_id === id) as Budget),
  } as unknown as Budgets;
  return new Oracle({
    read,
    budgets: lookup,
    envelopes: { get: () => Promise.reject(new Error('no envelopes here')) },
    clock: () => new Date(TODAY + 3 * HOUR),
    lookbackPeriods: 5,
    maxEvents: 10_000,
  });
}

describe('Oracle history', () => {
  // A workflow whose days start with a burst: 12 calls of 0.5 USD in the first three hours, then 4 an hour.
  const day = (budgetId: string, start: number, hours: number) =>
    Array.from({ length: hours }, (_, h) => {
      const calls = h < 3 ? 4 : 4 / 3;
      return Array.from({ length: Math.round(calls * 3) }, (_, i) =>
        event(budgetId, start + h * HOUR + (i * HOUR) / Math.round(calls * 3), 0.5 / 3),
      );
    }).flat();

  it("takes the earlier periods of the other budgets of the workflow as the day's usual shape", async () => {
    const own = budget('00000000-0000-4000-8000-000000000001', 'wf');
    const sibling = budget('00000000-0000-4000-8000-000000000002', 'wf');
    const stranger = budget('00000000-0000-4000-8000-000000000003', null);
    const past = [1, 2, 3].flatMap((d) => day(sibling.budget_id, TODAY - d * DAY, 24));
    const today = day(own.budget_id, TODAY, 3);
    const withWorkflow = await oracle([own, sibling, stranger], [...past, ...today]).predict(own);
    expect(withWorkflow.history_periods).toBe(3);
    expect(withWorkflow.sample_size).toBe(today.length);
    const alone = await oracle([own, stranger], [...past, ...today]).predict(own);
    expect(alone.history_periods).toBe(0);
    // The burst is the workflow's habit: with its history the day is expected to spend less.
    expect(withWorkflow.expected_spend_at_end).toBeLessThan(alone.expected_spend_at_end);
  });
});
