import {
  overrunResponse,
  predictOverrun,
  predictWorkload,
  seasonalProfile,
  type PredictOverrunRequest,
  type PredictOverrunResponse,
  type RecordedCall,
} from '../../core/brain/index.ts';
import { microsToUsd, usdToMicros, type Budget, type Envelope } from '../../core/domain/index.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { Envelopes } from '../envelopes/envelopes.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { EventFilter, Readers } from '../storage/storage.ts';
import { pickRecentEvents } from './recent-events.ts';

export interface OracleDeps {
  read: Readers;
  budgets: Budgets;
  envelopes: Pick<Envelopes, 'get'>;
  clock: () => Date;
  /** Earlier periods read for the usual intensity over a period. */
  lookbackPeriods: number;
  /** At most this many events are read per prediction (newest first). */
  maxEvents: number;
}

/** What is predicted: a budget's period or an envelope's lifetime, its limits and where its calls are. */
interface Subject {
  tenant: string;
  budgetId: string | null;
  envelopeId: string | null;
  periodStart: number;
  periodEnd: number | null;
  /** Earlier periods of the same length whose calls give the usual intensity. */
  lookback: number;
  dimensions: Dimension[];
  /** How the store is asked for its events, and which of those are its. */
  filter: EventFilter;
  owns: (e: StoredEvent) => boolean;
  /** Events that shape the earlier periods too (the other budgets of the same workflow). */
  related: (e: StoredEvent) => boolean;
}

interface Dimension {
  name: 'cost_usd' | 'tokens';
  limit: number;
  spent: number;
  amount: (call: HistoryCall) => number;
}

/** What the prediction keeps of one usage event: its time, whose it is, and what it spent. */
interface HistoryCall {
  at: number;
  /** The subject's own call, not one of a related budget. */
  own: boolean;
  costUsd: number;
  tokens: number;
}

/**
 * The Oracle on stored budgets and envelopes: their spend so far (the budget's usage, the
 * envelope's cost summary) and their recorded history (the usage events that named them) in the
 * pure model of core/brain/oracle. A budget's earlier periods also take the calls of the other
 * budgets of its workflow (the usual shape of the workflow's day, and its call costs); its
 * current period only its own. An envelope's period is its lifetime: from its creation to its
 * `timeout_seconds`.
 */
export class Oracle {
  readonly #deps: OracleDeps;

  constructor(deps: OracleDeps) {
    this.#deps = deps;
  }

  /**
   * One overrun question as REST and gRPC ask it: a workload given inline, an envelope, or a
   * budget (the request schema admits exactly one).
   */
  async answer(tenant: string, request: PredictOverrunRequest): Promise<PredictOverrunResponse> {
    if (request.workload !== undefined) return predictWorkload(request.workload, this.#deps.clock);
    if (request.envelope_id !== undefined) return this.predictEnvelope(tenant, request.envelope_id);
    return this.predictBudget(tenant, request.budget_id as string);
  }

  /** The prediction for the budget's limit most likely to run over (cost, else tokens). */
  async predictBudget(tenant: string, budgetId: string): Promise<PredictOverrunResponse> {
    return this.predict(await this.#deps.budgets.get(tenant, budgetId));
  }

  async predict(budget: Budget): Promise<PredictOverrunResponse> {
    const { limits, usage } = budget;
    const end = usage.period_end ?? budget.expires_at;
    const siblings =
      budget.workflow_id === null
        ? new Set<string>()
        : new Set(
            (await this.#deps.budgets.list(budget.tenant_id, 'all'))
              .filter((b) => b.workflow_id === budget.workflow_id && b.budget_id !== budget.budget_id)
              .map((b) => b.budget_id),
          );
    return this.#predict({
      tenant: budget.tenant_id,
      budgetId: budget.budget_id,
      envelopeId: null,
      periodStart: Date.parse(usage.period_start),
      periodEnd: end === null ? null : Date.parse(end),
      // A `total` budget has no earlier periods: only its own history counts.
      lookback: usage.period_end === null ? 0 : this.#deps.lookbackPeriods,
      dimensions: dimensionsOf(
        limits.max_cost_usd,
        limits.max_tokens,
        usage.cost_micros,
        usage.tokens_input + usage.tokens_output,
      ),
      filter: {},
      owns: (e) => e.budget_id === budget.budget_id,
      related: (e) => e.budget_id !== null && siblings.has(e.budget_id),
    });
  }

  /** The prediction for the envelope's cost or token limit over its lifetime. */
  async predictEnvelope(tenant: string, envelopeId: string): Promise<PredictOverrunResponse> {
    const envelope: Envelope = await this.#deps.envelopes.get(tenant, envelopeId);
    const { governance, cost } = envelope;
    const start = Date.parse(envelope.created_at);
    return this.#predict({
      tenant,
      budgetId: envelope.budget_id,
      envelopeId,
      periodStart: start,
      periodEnd: governance.timeout_seconds === null ? null : start + governance.timeout_seconds * 1000,
      lookback: 0,
      dimensions: dimensionsOf(
        governance.cost_limit_usd,
        governance.token_limit,
        cost.cost_micros,
        cost.tokens_input + cost.tokens_output,
      ),
      filter: { envelopeId },
      owns: () => true,
      related: () => false,
    });
  }

  async #predict(subject: Subject): Promise<PredictOverrunResponse> {
    const now = this.#deps.clock().getTime();
    const { periodStart, periodEnd, dimensions, lookback } = subject;
    const first = dimensions[0];
    if (periodEnd === null || first === undefined)
      return unanswered(subject, first, first === undefined ? 'no_limit' : 'no_period_end');
    const length = periodEnd - periodStart;
    const events = await this.#history(subject, periodStart - lookback * length, now);
    let best: PredictOverrunResponse | undefined;
    for (const dimension of dimensions) {
      const amountOf = dimension.amount;
      // A call that spent nothing of this limit (a tool event without cost) is not part of its run-rate.
      const calls = events.map((e) => callOf(e, amountOf)).filter((c) => c.amount > 0);
      const current = events
        .filter((e) => e.own)
        .map((e) => callOf(e, amountOf))
        .filter((c) => c.amount > 0 && c.at >= periodStart);
      const past = Array.from({ length: lookback }, (_, i) => {
        const start = periodStart - (i + 1) * length;
        return { start, end: start + length, calls: calls.filter((c) => c.at >= start && c.at < start + length) };
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
        budgetId: subject.budgetId,
        envelopeId: subject.envelopeId,
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
   * The subject's usage calls from `since`, newest first until then or `maxEvents`. Events are
   * listed by arrival; one that arrived before `since` ends the reading.
   */
  #history(subject: Subject, since: number, now: number): Promise<HistoryCall[]> {
    return pickRecentEvents(this.#deps.read, {
      tenant: subject.tenant,
      filter: subject.filter,
      since,
      maxEvents: this.#deps.maxEvents,
      pick: (event) => {
        const own = subject.owns(event);
        if (!own && !subject.related(event)) return undefined;
        const at = Date.parse(event.timestamp);
        if (!(at >= since && at <= now)) return undefined;
        return {
          at,
          own,
          costUsd: microsToUsd(event.cost_micros),
          tokens: event.tokens.input + event.tokens.output,
        };
      },
    });
  }
}

function dimensionsOf(
  maxCostUsd: number | null,
  maxTokens: number | null,
  costMicros: number,
  tokens: number,
): Dimension[] {
  const out: Dimension[] = [];
  if (maxCostUsd !== null && usdToMicros(maxCostUsd) > 0)
    out.push({
      name: 'cost_usd',
      limit: maxCostUsd,
      spent: microsToUsd(costMicros),
      amount: (c) => c.costUsd,
    });
  if (maxTokens !== null && maxTokens > 0)
    out.push({ name: 'tokens', limit: maxTokens, spent: tokens, amount: (c) => c.tokens });
  return out;
}

function unanswered(
  subject: Subject,
  dimension: Dimension | undefined,
  method: 'no_limit' | 'no_period_end',
): PredictOverrunResponse {
  const spent = dimension?.spent ?? 0;
  return {
    budget_id: subject.budgetId,
    envelope_id: subject.envelopeId,
    dimension: dimension?.name ?? 'cost_usd',
    limit: dimension?.limit ?? 0,
    spent,
    probability: null,
    expected_spend_at_end: spent,
    spend_low: spent,
    spend_high: spent,
    expected_exhaustion_at: null,
    calls_per_hour_now: 0,
    trend: 'steady',
    sample_size: 0,
    history_periods: 0,
    method,
    period_start: new Date(subject.periodStart).toISOString(),
    period_end: subject.periodEnd === null ? null : new Date(subject.periodEnd).toISOString(),
  };
}

function callOf(call: HistoryCall, amount: (c: HistoryCall) => number): RecordedCall {
  return { at: call.at, amount: amount(call) };
}
