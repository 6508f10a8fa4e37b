import {
  overrunResponse,
  predictOverrun,
  seasonalProfile,
  type PredictOverrunResponse,
  type RecordedCall,
} from '../../core/brain/index.ts';
import { microsToUsd, type Budget } from '../../core/domain/index.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Readers } from '../storage/storage.ts';

export interface OracleDeps {
  read: Readers;
  budgets: Budgets;
  clock: () => Date;
  /** Earlier periods read for the usual intensity over a period. */
  lookbackPeriods: number;
  /** At most this many events are read per prediction (newest first). */
  maxEvents: number;
}

const PAGE = 100;

/**
 * The Oracle on stored budgets: their spend so far (the budget's usage) and their recorded
 * history (the usage events that named the budget) in the pure model of core/brain/oracle.
 */
export class Oracle {
  readonly #deps: OracleDeps;

  constructor(deps: OracleDeps) {
    this.#deps = deps;
  }

  /** The prediction for the budget's limit most likely to run over (cost, else tokens). */
  async predictBudget(tenant: string, budgetId: string): Promise<PredictOverrunResponse> {
    return this.predict(await this.#deps.budgets.get(tenant, budgetId));
  }

  async predict(budget: Budget): Promise<PredictOverrunResponse> {
    const now = this.#deps.clock().getTime();
    const periodStart = Date.parse(budget.usage.period_start);
    const end = budget.usage.period_end ?? budget.expires_at;
    const periodEnd = end === null ? null : Date.parse(end);
    const dimensions = limitsOf(budget);
    const first = dimensions[0];
    if (periodEnd === null || first === undefined)
      return this.#unanswered(
        budget,
        first,
        periodStart,
        periodEnd,
        first === undefined ? 'no_limit' : 'no_period_end',
      );
    const length = periodEnd - periodStart;
    // A `total` budget has no earlier periods: only its own history counts.
    const lookback = budget.usage.period_end === null ? 0 : this.#deps.lookbackPeriods;
    const events = await this.#history(budget, periodStart - lookback * length, now);
    let best: PredictOverrunResponse | undefined;
    for (const dimension of dimensions) {
      const amountOf = dimension.amount;
      // A call that spent nothing of this limit (a tool event without cost) is not part of its run-rate.
      const calls = events.map((e) => callOf(e, amountOf)).filter((c) => c.amount > 0);
      const current = calls.filter((c) => c.at >= periodStart);
      const past = Array.from({ length: lookback }, (_, i) => {
        const start = periodStart - (i + 1) * length;
        return {
          start,
          end: start + length,
          calls: calls.filter((c) => c.at >= start && c.at < start + length),
        };
      });
      const profile = seasonalProfile(past);
      const prediction = predictOverrun({
        limit: dimension.limit,
        spent: dimension.spent,
        now: Math.min(now, periodEnd),
        periodStart,
        periodEnd,
        calls: current,
        windowStart: periodStart,
        pastAmounts: past.flatMap((p) => p.calls.map((c) => c.amount)),
        profile,
      });
      const response = overrunResponse(prediction, {
        budgetId: budget.budget_id,
        dimension: dimension.name,
        limit: dimension.limit,
        spent: dimension.spent,
        periodStart,
        periodEnd,
        historyPeriods: profile.length === 0 ? 0 : past.filter((p) => p.calls.length > 0).length,
      });
      if (best === undefined || (response.probability ?? -1) > (best.probability ?? -1)) best = response;
    }
    return best as PredictOverrunResponse;
  }

  /**
   * The budget's usage events from `since`, newest first until then or `maxEvents`. Events are
   * listed by arrival; one that arrived before `since` ends the reading.
   */
  async #history(budget: Budget, since: number, now: number): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    let pageToken: string | null = null;
    for (let read = 0; read < this.#deps.maxEvents; read += PAGE) {
      const page = await this.#deps.read.events.list(budget.tenant_id, {}, { pageSize: PAGE, pageToken });
      for (const event of page.items) {
        if (event.budget_id !== budget.budget_id) continue;
        const at = Date.parse(event.timestamp);
        if (at >= since && at <= now) out.push(event);
      }
      const oldest = page.items.at(-1);
      if (page.nextPageToken === null || oldest === undefined || Date.parse(oldest.received_at) < since) break;
      pageToken = page.nextPageToken;
    }
    return out;
  }

  #unanswered(
    budget: Budget,
    dimension: Dimension | undefined,
    periodStart: number,
    periodEnd: number | null,
    method: 'no_limit' | 'no_period_end',
  ): PredictOverrunResponse {
    return {
      budget_id: budget.budget_id,
      dimension: dimension?.name ?? 'cost_usd',
      limit: dimension?.limit ?? 0,
      spent: dimension?.spent ?? 0,
      probability: null,
      expected_spend_at_end: dimension?.spent ?? 0,
      spend_low: dimension?.spent ?? 0,
      spend_high: dimension?.spent ?? 0,
      expected_exhaustion_at: null,
      calls_per_hour_now: 0,
      trend: 'steady',
      sample_size: 0,
      history_periods: 0,
      method,
      period_start: new Date(periodStart).toISOString(),
      period_end: periodEnd === null ? null : new Date(periodEnd).toISOString(),
    };
  }
}

interface Dimension {
  name: 'cost_usd' | 'tokens';
  limit: number;
  spent: number;
  amount: (e: StoredEvent) => number;
}

function limitsOf(budget: Budget): Dimension[] {
  const out: Dimension[] = [];
  const { limits, usage } = budget;
  if (limits.max_cost_usd !== null)
    out.push({
      name: 'cost_usd',
      limit: limits.max_cost_usd,
      spent: microsToUsd(usage.cost_micros),
      amount: (e) => microsToUsd(e.cost_micros),
    });
  if (limits.max_tokens !== null)
    out.push({
      name: 'tokens',
      limit: limits.max_tokens,
      spent: usage.tokens_input + usage.tokens_output,
      amount: (e) => e.tokens.input + e.tokens.output,
    });
  return out;
}

function callOf(event: StoredEvent, amount: (e: StoredEvent) => number): RecordedCall {
  return { at: Date.parse(event.timestamp), amount: amount(event) };
}
