import { NO_LIMITS } from './index.ts';
import { describe, expect, it } from 'vitest';
import type { Budget } from './budget.ts';
import {
  addUsage,
  budgetStatus,
  checkBudget,
  freshUsage,
  newlyCrossedAlerts,
  percents,
  remaining,
  rollOver,
  ZERO_DELTA,
} from './budget-math.ts';
import { MAX_COUNT, MAX_TOKEN_TOTAL, MAX_USD } from './bounds.ts';
import { periodBounds } from './period.ts';

const created = new Date('2026-01-15T08:00:00Z');

function budget(overrides: Partial<Budget> = {}, at = created): Budget {
  const base = { period: overrides.period ?? 'daily', created_at: created.toISOString() } as const;
  return {
    budget_id: '00000000-0000-4000-8000-000000000001',
    tenant_id: 't',
    name: 'b',
    description: '',
    type: 'hybrid',
    period: base.period,
    limits: { ...NO_LIMITS, max_tokens: 1000, max_cost_usd: 2, max_executions: 3 },
    alerts: [
      { percent: 50, action: 'notify' },
      { percent: 90, action: 'terminate' },
    ],
    expires_at: null,
    workflow_id: null,
    tags: {},
    usage: freshUsage(base, at),
    created_at: base.created_at,
    updated_at: base.created_at,
    ...overrides,
  };
}

describe('periodBounds', () => {
  const at = new Date('2026-11-22T13:45:10Z'); // a Sunday
  it.each([
    ['hourly', '2026-11-22T13:00:00.000Z', '2026-11-22T14:00:00.000Z'],
    ['daily', '2026-11-22T00:00:00.000Z', '2026-11-23T00:00:00.000Z'],
    ['weekly', '2026-11-16T00:00:00.000Z', '2026-11-23T00:00:00.000Z'],
    ['monthly', '2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z'],
    ['quarterly', '2026-10-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z'],
  ] as const)('%s periods are calendar periods in UTC', (period, start, end) => {
    const bounds = periodBounds(period, at, created);
    expect([bounds.start.toISOString(), bounds.end?.toISOString()]).toEqual([start, end]);
  });

  it('starts a total period at creation and never ends it', () => {
    expect(periodBounds('total', at, created)).toEqual({ start: created, end: null });
  });

  it('rolls a month over at the year boundary', () => {
    const bounds = periodBounds('monthly', new Date('2026-12-31T23:59:59Z'), created);
    expect(bounds.end?.toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });
});

describe('budget usage', () => {
  it('rolls usage and fired alerts over when the period ends, and not before', () => {
    const used = budget({
      usage: {
        ...addUsage(
          freshUsage({ period: 'daily', created_at: created.toISOString() }, created),
          {
            ...ZERO_DELTA,
            tokens_input: 600,
            cost_micros: 1_500_000,
          },
          'refuse',
        ),
        alerts_fired: [50],
      },
    });
    expect(rollOver(used, new Date('2026-01-15T23:59:59Z'))).toBe(used);
    const next = rollOver(used, new Date('2026-01-16T00:00:00Z'));
    expect(next.usage).toMatchObject({
      tokens_input: 0,
      cost_micros: 0,
      alerts_fired: [],
      period_start: '2026-01-16T00:00:00.000Z',
    });
  });

  it('lists crossed thresholds in ascending order whatever their order, and none past a limit of zero', () => {
    const alerts = [
      { percent: 100, action: 'terminate' },
      { percent: 20, action: 'notify' },
      { percent: 60, action: 'notify' },
    ] as const;
    const b = budget({
      alerts: [...alerts],
      limits: { ...NO_LIMITS, max_llm_calls: 10, max_tool_calls: 4 },
      usage: { ...budget().usage, llm_calls: 7, tool_calls: 1 },
    });
    expect(newlyCrossedAlerts(b)).toEqual([20, 60]);
    expect(newlyCrossedAlerts({ ...b, usage: { ...b.usage, tool_calls: 4, alerts_fired: [60] } })).toEqual([20, 100]);
    // 0 of a limit of 0 is no percent at all (NaN), as before: nothing is crossed by it.
    const zero = budget({ alerts: [...alerts], limits: { ...NO_LIMITS, max_tokens: 0 } });
    expect(percents(zero).highest).toBeNaN();
    expect(newlyCrossedAlerts(zero)).toEqual([]);
    expect(newlyCrossedAlerts({ ...b, alerts: [] })).toEqual([]);
  });

  it('takes the highest limit percentage for alerts, leaving the execution count out', () => {
    const b = budget({ usage: { ...budget().usage, tokens_input: 300, cost_micros: 1_900_000, executions: 3 } });
    expect(percents(b)).toMatchObject({ tokens: 30, cost: 95, executions: 100, highest: 95 });
    expect(newlyCrossedAlerts(b)).toEqual([50, 90]);
    expect(newlyCrossedAlerts({ ...b, usage: { ...b.usage, alerts_fired: [50] } })).toEqual([90]);
    expect(budgetStatus(b, created)).toBe('active');
  });

  it('is exhausted at any usage limit, expired after expires_at', () => {
    expect(budgetStatus(budget({ usage: { ...budget().usage, tokens_output: 1000 } }), created)).toBe('exhausted');
    expect(budgetStatus(budget({ expires_at: '2026-01-15T09:00:00Z' }), new Date('2026-01-15T09:00:00Z'))).toBe(
      'expired',
    );
  });

  it('checks an estimate against what is left', () => {
    const b = budget({ usage: { ...budget().usage, tokens_input: 900, cost_micros: 500_000 } });
    expect(remaining(b)).toEqual({ tokens: 100, cost_micros: 1_500_000, executions: 3 });
    expect(checkBudget(b, { tokens: 100, cost_micros: 0 }, created)).toMatchObject({
      allowed: true,
      remaining_tokens: 100,
      remaining_cost_usd: 1.5,
    });
    expect(checkBudget(b, { tokens: 101, cost_micros: 0 }, created)).toMatchObject({
      allowed: false,
      reason: expect.stringContaining('101 tokens'),
    });
    expect(checkBudget(b, { tokens: 0, cost_micros: 1_600_000 }, created)).toMatchObject({
      allowed: false,
      reason: expect.stringContaining('1.6 USD'),
    });
  });
});

describe('running totals', () => {
  const near = { ...budget().usage, tokens_input: MAX_TOKEN_TOTAL - 10, cost_micros: Number.MAX_SAFE_INTEGER - 5 };

  it('adds exactly up to the maximum', () => {
    const usage = addUsage(near, { ...ZERO_DELTA, tokens_input: 10, cost_micros: 5 }, 'refuse');
    expect([usage.tokens_input, usage.cost_micros]).toEqual([MAX_TOKEN_TOTAL, Number.MAX_SAFE_INTEGER]);
    expect(Number.isSafeInteger(usage.tokens_input + usage.tokens_output + MAX_TOKEN_TOTAL)).toBe(true);
  });

  it('refuses an addition past the maximum, naming the total, when asked to refuse', () => {
    expect(() => addUsage(near, { ...ZERO_DELTA, tokens_input: 11 }, 'refuse')).toThrow(
      expect.objectContaining({ code: 'SVC-EVT-4002', message: expect.stringContaining('tokens_input') }),
    );
    expect(() => addUsage(near, { ...ZERO_DELTA, cost_micros: 6 }, 'refuse')).toThrow(
      expect.objectContaining({ code: 'SVC-EVT-4002' }),
    );
  });

  it('sums every field and keeps the stored field order (the record shape LMDB stores)', () => {
    const usage = {
      ...budget().usage,
      tokens_output: 7,
      executions: 2,
      llm_calls: 3,
      tool_calls: 4,
      alerts_fired: [50],
    };
    const delta = { tokens_input: 1, tokens_output: 2, cost_micros: 3, executions: 4, llm_calls: 5, tool_calls: 6 };
    const sum = addUsage(usage, delta, 'refuse');
    expect(Object.keys(sum)).toEqual(Object.keys(usage));
    expect(sum).toEqual({
      ...usage,
      tokens_input: usage.tokens_input + 1,
      tokens_output: 9,
      cost_micros: usage.cost_micros + 3,
      executions: 6,
      llm_calls: 8,
      tool_calls: 10,
    });
  });

  it('holds a saturating total at its maximum, past every limit, so the budget stays exhausted', () => {
    const usage = addUsage(near, { ...ZERO_DELTA, tokens_input: 1e300, cost_micros: Infinity }, 'saturate');
    expect([usage.tokens_input, usage.cost_micros]).toEqual([MAX_TOKEN_TOTAL, Number.MAX_SAFE_INTEGER]);
    const limited = budget({ limits: { ...budget().limits, max_tokens: MAX_COUNT, max_cost_usd: MAX_USD }, usage });
    expect(budgetStatus(limited, created)).toBe('exhausted');
  });
});
