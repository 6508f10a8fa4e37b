import {
  boundedSum,
  emptyUsage,
  MAX_TOKEN_TOTAL,
  MAX_TOTAL,
  parseIsoTime,
  type CostTotals,
  type Overflow,
  type PeriodUsage,
} from '../../core/domain/index.ts';
import type { PeriodWindow } from './storage.ts';

/**
 * The usage a change in `period` adds to: the stored one while it is of the same or a later
 * period, else a fresh one for `period` (counters and fired alerts reset). Every backend rolls
 * over by this rule (PostgreSQL in its statements, with this for what it reports).
 */
export function usageIn(usage: PeriodUsage, period: PeriodWindow): PeriodUsage {
  return parseIsoTime(usage.period_start) >= parseIsoTime(period.start) ? usage : emptyUsage(period.start, period.end);
}

/** Cost totals plus a delta, each bounded (the totals' names are those a refusal reports). */
export function addCost(cost: CostTotals, delta: CostTotals, overflow: Overflow): CostTotals {
  const add = (field: string, total: number, added: number, max = MAX_TOTAL) =>
    boundedSum(total, added, `envelope ${field}`, overflow, max);
  const model_costs = [...cost.model_costs];
  for (const added of delta.model_costs) {
    const i = model_costs.findIndex((m) => m.model_id === added.model_id);
    const prev =
      i >= 0
        ? model_costs[i]!
        : { model_id: added.model_id, input_tokens: 0, output_tokens: 0, cost_micros: 0, call_count: 0 };
    const next = {
      ...prev,
      input_tokens: add('model input_tokens', prev.input_tokens, added.input_tokens, MAX_TOKEN_TOTAL),
      output_tokens: add('model output_tokens', prev.output_tokens, added.output_tokens, MAX_TOKEN_TOTAL),
      cost_micros: add('model cost_micros', prev.cost_micros, added.cost_micros),
      call_count: add('model call_count', prev.call_count, added.call_count),
    };
    if (i >= 0) model_costs[i] = next;
    else model_costs.push(next);
  }
  return {
    tokens_input: add('tokens_input', cost.tokens_input, delta.tokens_input, MAX_TOKEN_TOTAL),
    tokens_output: add('tokens_output', cost.tokens_output, delta.tokens_output, MAX_TOKEN_TOTAL),
    cost_micros: add('cost_micros', cost.cost_micros, delta.cost_micros),
    llm_calls: add('llm_calls', cost.llm_calls, delta.llm_calls),
    tool_calls: add('tool_calls', cost.tool_calls, delta.tool_calls),
    model_costs,
  };
}
