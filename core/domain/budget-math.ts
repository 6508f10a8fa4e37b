import { boundedSum, MAX_TOKEN_TOTAL, type Overflow } from './bounds.ts';
import { microsToUsd, usdToMicros } from './common.ts';
import type { Budget, BudgetStatus, PeriodUsage } from './budget.ts';
import { parseIsoTime } from './iso-time.ts';
import { periodBounds } from './period.ts';

export interface UsageDelta {
  tokens_input: number;
  tokens_output: number;
  cost_micros: number;
  executions: number;
  llm_calls: number;
  tool_calls: number;
}

export const ZERO_DELTA: UsageDelta = {
  tokens_input: 0,
  tokens_output: 0,
  cost_micros: 0,
  executions: 0,
  llm_calls: 0,
  tool_calls: 0,
};

/** No usage yet in the period from `start` to `end` (ISO times; `end` null for a total budget). */
export function emptyUsage(start: string, end: string | null): PeriodUsage {
  return { period_start: start, period_end: end, ...ZERO_DELTA, alerts_fired: [] };
}

export function freshUsage(budget: Pick<Budget, 'period' | 'created_at'>, now: Date): PeriodUsage {
  const bounds = periodBounds(budget.period, now, new Date(budget.created_at));
  return emptyUsage(bounds.start.toISOString(), bounds.end?.toISOString() ?? null);
}

/** The budget with its usage moved to the period `now` falls in (usage and fired alerts reset). */
export function rollOver(budget: Budget, now: Date): Budget {
  const end = budget.usage.period_end;
  if (end === null || now.getTime() < parseIsoTime(end)) return budget;
  return { ...budget, usage: freshUsage(budget, now) };
}

/**
 * The budget period `now` falls in (`start` identifies it, `end` is null for `total`): what a
 * usage change is counted in, the stored usage's period while it runs.
 */
export function currentPeriod(budget: Budget, now: Date): { start: string; end: string | null } {
  const { period_start: start, period_end: end } = rollOver(budget, now).usage;
  return { start, end };
}

/**
 * Usage plus a delta, every total kept exact (see `Overflow` for what happens at the maximum).
 * Field by field: the event processor sums a batch's usage twice per event, where a walk over the
 * fields by name cost three times as much.
 */
export function addUsage(usage: PeriodUsage, delta: UsageDelta, overflow: Overflow): PeriodUsage {
  return {
    period_start: usage.period_start,
    period_end: usage.period_end,
    tokens_input: boundedSum(usage.tokens_input, delta.tokens_input, 'budget tokens_input', overflow, MAX_TOKEN_TOTAL),
    tokens_output: boundedSum(
      usage.tokens_output,
      delta.tokens_output,
      'budget tokens_output',
      overflow,
      MAX_TOKEN_TOTAL,
    ),
    cost_micros: boundedSum(usage.cost_micros, delta.cost_micros, 'budget cost_micros', overflow),
    executions: boundedSum(usage.executions, delta.executions, 'budget executions', overflow),
    llm_calls: boundedSum(usage.llm_calls, delta.llm_calls, 'budget llm_calls', overflow),
    tool_calls: boundedSum(usage.tool_calls, delta.tool_calls, 'budget tool_calls', overflow),
    alerts_fired: usage.alerts_fired,
  };
}

function percent(used: number, limit: number | null): number | null {
  return limit === null ? null : (used / limit) * 100;
}

/**
 * Calls `each` with what is used of every usage limit set and the limit: all but the execution
 * count, which stops new envelopes but neither exhausts a budget nor ends the ones running. Walked
 * without building a list, as the event processor asks it of every event's budget.
 */
function eachUsageLimit({ limits, usage }: Budget, each: (used: number, limit: number) => void): void {
  if (limits.max_tokens !== null) each(usage.tokens_input + usage.tokens_output, limits.max_tokens);
  if (limits.max_cost_usd !== null) each(usage.cost_micros, usdToMicros(limits.max_cost_usd));
  if (limits.max_input_tokens !== null) each(usage.tokens_input, limits.max_input_tokens);
  if (limits.max_output_tokens !== null) each(usage.tokens_output, limits.max_output_tokens);
  if (limits.max_llm_calls !== null) each(usage.llm_calls, limits.max_llm_calls);
  if (limits.max_tool_calls !== null) each(usage.tool_calls, limits.max_tool_calls);
}

/** `highest` of `percents`: the percent used of each usage limit set, the highest of them (at least 0). */
function highestPercent(budget: Budget): number {
  // Math.max of two, as `percents` had it of all: a NaN (0 of a limit of 0) stays NaN.
  let highest = 0;
  eachUsageLimit(budget, (used, limit) => {
    highest = Math.max(highest, (used / limit) * 100);
  });
  return highest;
}

/**
 * Percent used of each limit that is set (null when unlimited). `highest` drives alerts and
 * exhaustion; the execution count is left out of it because reaching the envelope count stops new
 * envelopes but must not end the ones already running.
 */
export function percents(budget: Budget): {
  tokens: number | null;
  cost: number | null;
  executions: number | null;
  highest: number;
} {
  const { limits, usage } = budget;
  const tokens = percent(usage.tokens_input + usage.tokens_output, limits.max_tokens);
  const cost = percent(usage.cost_micros, limits.max_cost_usd === null ? null : usdToMicros(limits.max_cost_usd));
  const executions = percent(usage.executions, limits.max_executions);
  return { tokens, cost, executions, highest: highestPercent(budget) };
}

export function isExpired(budget: Budget, now: Date): boolean {
  return budget.expires_at !== null && now.getTime() >= Date.parse(budget.expires_at);
}

/** Exhausted when any usage limit (not the execution count alone) has been reached this period. */
export function isExhausted(budget: Budget): boolean {
  let reached = false;
  eachUsageLimit(budget, (used, limit) => {
    if (used >= limit) reached = true;
  });
  return reached;
}

export function budgetStatus(budget: Budget, now: Date): BudgetStatus {
  if (isExpired(budget, now)) return 'expired';
  return isExhausted(budget) ? 'exhausted' : 'active';
}

export interface Remaining {
  tokens: number | null;
  cost_micros: number | null;
  executions: number | null;
}

export function remaining(budget: Budget): Remaining {
  const { limits, usage } = budget;
  return {
    tokens:
      limits.max_tokens === null ? null : Math.max(0, limits.max_tokens - usage.tokens_input - usage.tokens_output),
    cost_micros:
      limits.max_cost_usd === null ? null : Math.max(0, usdToMicros(limits.max_cost_usd) - usage.cost_micros),
    executions: limits.max_executions === null ? null : Math.max(0, limits.max_executions - usage.executions),
  };
}

/**
 * Alert thresholds the usage has reached and that have not fired yet this period, in ascending
 * order. The event processor asks it after every event: none are crossed almost every time, which
 * it finds without building a list.
 */
export function newlyCrossedAlerts(after: Budget): number[] {
  if (after.alerts.length === 0) return [];
  const highest = highestPercent(after);
  let crossed: number[] | undefined;
  for (const { percent } of after.alerts) {
    if (highest >= percent && !after.usage.alerts_fired.includes(percent)) (crossed ??= []).push(percent);
  }
  return crossed === undefined ? [] : crossed.sort((a, b) => a - b);
}

export interface CheckOutcome {
  allowed: boolean;
  reason: string;
  remaining_tokens: number | null;
  remaining_cost_usd: number | null;
  warnings: string[];
}

/** Whether a call of the given estimate fits the budget now (spec 2.3 BudgetCheckResult). */
export function checkBudget(
  budget: Budget,
  estimate: { tokens: number; cost_micros: number },
  now: Date,
): CheckOutcome {
  const left = remaining(budget);
  const base = {
    remaining_tokens: left.tokens,
    remaining_cost_usd: left.cost_micros === null ? null : microsToUsd(left.cost_micros),
  };
  if (isExpired(budget, now)) return { ...base, allowed: false, reason: 'budget expired', warnings: [] };
  if (isExhausted(budget)) return { ...base, allowed: false, reason: 'budget exhausted', warnings: [] };
  if (left.tokens !== null && estimate.tokens > left.tokens) {
    return {
      ...base,
      allowed: false,
      reason: `estimated ${estimate.tokens} tokens exceed the ${left.tokens} remaining`,
      warnings: [],
    };
  }
  if (left.cost_micros !== null && estimate.cost_micros > left.cost_micros) {
    return {
      ...base,
      allowed: false,
      reason: `estimated cost ${microsToUsd(estimate.cost_micros)} USD exceeds the ${microsToUsd(left.cost_micros)} USD remaining`,
      warnings: [],
    };
  }
  const warnings = budget.alerts
    .filter((a) => percents(budget).highest >= a.percent)
    .map((a) => `usage at or above the ${a.percent}% threshold`);
  return { ...base, allowed: true, reason: 'within budget', warnings };
}

/**
 * The budget's status with the warning level of spec 3.2 (MCP `warning`, gRPC
 * BUDGET_STATUS_TYPE_WARNING): active, but an alert threshold below 100 % has been reached.
 */
export function budgetStatusWithWarning(budget: Budget, now: Date): BudgetStatus | 'warning' {
  const status = budgetStatus(budget, now);
  if (status !== 'active') return status;
  const { highest } = percents(budget);
  return budget.alerts.some((a) => a.percent < 100 && highest >= a.percent) ? 'warning' : 'active';
}
