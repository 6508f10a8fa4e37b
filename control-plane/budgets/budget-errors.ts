import { SvcError, type SvcCode } from '../../core/errors/index.ts';
import { microsToUsd, usdToMicros, type Budget } from '../../core/domain/index.ts';

/**
 * A BudgetError (spec 2.1) for the limit that binds: cost when a cost limit is set and reached,
 * else tokens, else the execution count. current_usage and limit share that limit's unit.
 */
export function budgetError(code: SvcCode, budget: Budget, message: string): SvcError {
  const { limits, usage } = budget;
  const tokens = usage.tokens_input + usage.tokens_output;
  let current: number;
  let limit: number;
  let unit: string;
  if (code === 'SVC-BUD-3004' && limits.max_executions !== null) {
    [current, limit, unit] = [usage.executions, limits.max_executions, 'executions'];
  } else if (
    limits.max_cost_usd !== null &&
    (usage.cost_micros >= usdToMicros(limits.max_cost_usd) || limits.max_tokens === null)
  ) {
    [current, limit, unit] = [microsToUsd(usage.cost_micros), limits.max_cost_usd, 'usd'];
  } else {
    [current, limit, unit] = [tokens, limits.max_tokens ?? 0, 'tokens'];
  }
  return new SvcError(code, message, { budget_id: budget.budget_id, current_usage: current, current, limit, unit });
}

export function budgetNotFound(budgetId: string): SvcError {
  return new SvcError('SVC-BUD-3002', `budget ${budgetId} not found`, { budget_id: budgetId });
}
