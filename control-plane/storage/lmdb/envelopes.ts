import {
  boundedSum,
  isFinal,
  MAX_TOKEN_TOTAL,
  MAX_TOTAL,
  type CostTotals,
  type Envelope,
  type EnvelopeStatus,
  type Overflow,
} from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { EnvelopeFilter, EnvelopeRepository, Page, PageRequest, StatusChange } from '../storage.ts';
import type { Entry, KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart, where } from './pages.ts';
import type { Sync } from './promised.ts';

/** Where a budget's live envelopes are indexed (`budget_envelope`), so ending them all is a range. */
const liveIndexId = (budgetId: string, envelopeId: string) => `${budgetId}/${envelopeId}`;

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

export class LmdbEnvelopes implements Sync<EnvelopeRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, envelopeId: string): Envelope | undefined {
    return this.#kv.get<Envelope>(this.#layout.tenant(tenant, 'envelope'), envelopeId);
  }

  list(tenant: string, filter: EnvelopeFilter, request?: PageRequest): Page<Envelope> {
    const { size, after } = pageStart(request);
    const all = this.#kv.range<Envelope>(this.#layout.tenant(tenant, 'envelope'), { after });
    return pageOf(
      where(
        all,
        (e) =>
          (filter.status === undefined || e.status === filter.status) &&
          (filter.budgetId === undefined || e.budget_id === filter.budgetId),
      ),
      size,
    );
  }

  listLive(tenant: string, budgetId: string, request?: PageRequest): Page<Envelope> {
    const { size, after } = pageStart(request);
    const index = this.#kv.range<string>(this.#layout.tenant(tenant, 'budget_envelope'), {
      prefix: `${budgetId}/`,
      after,
    });
    const envelopes = this.#layout.tenant(tenant, 'envelope');
    const kv = this.#kv;
    function* live(): Generator<Entry<Envelope>> {
      for (const { id, value } of index) {
        const envelope = kv.get<Envelope>(envelopes, value);
        if (envelope !== undefined && !isFinal(envelope.status)) yield { id, value: envelope };
      }
    }
    return pageOf(live(), size);
  }

  insert(tenant: string, envelope: Envelope, options: { executionTaken: 'refuse' | 'keep' }): boolean {
    const envelopes = this.#layout.tenant(tenant, 'envelope');
    if (this.#kv.get(envelopes, envelope.envelope_id) !== undefined) return false;
    const executions = this.#layout.tenant(tenant, 'execution');
    const executionTaken = this.#kv.get(executions, envelope.execution_id) !== undefined;
    if (executionTaken && options.executionTaken === 'refuse') {
      throw taken(
        'execution_id',
        envelope.execution_id,
        `execution ${envelope.execution_id} already has an envelope`,
        'already has an envelope',
      );
    }
    this.#kv.put(envelopes, envelope.envelope_id, envelope);
    if (!executionTaken) this.#kv.put(executions, envelope.execution_id, envelope.envelope_id);
    if (envelope.budget_id !== null && !isFinal(envelope.status)) {
      this.#kv.put(
        this.#layout.tenant(tenant, 'budget_envelope'),
        liveIndexId(envelope.budget_id, envelope.envelope_id),
        envelope.envelope_id,
      );
    }
    return true;
  }

  charge(
    tenant: string,
    envelopeId: string,
    delta: CostTotals,
    overflow: Overflow,
    updatedAt: string,
  ): Envelope | undefined {
    const space = this.#layout.tenant(tenant, 'envelope');
    const envelope = this.#kv.get<Envelope>(space, envelopeId);
    if (envelope === undefined) return undefined;
    const charged: Envelope = { ...envelope, cost: addCost(envelope.cost, delta, overflow), updated_at: updatedAt };
    this.#kv.put(space, envelopeId, charged);
    return charged;
  }

  transition(tenant: string, envelopeId: string, from: EnvelopeStatus, change: StatusChange): Envelope | undefined {
    const space = this.#layout.tenant(tenant, 'envelope');
    const envelope = this.#kv.get<Envelope>(space, envelopeId);
    if (envelope === undefined || envelope.status !== from) return undefined;
    const next: Envelope = { ...envelope, ...change };
    this.#kv.put(space, envelopeId, next);
    if (isFinal(next.status) && next.budget_id !== null)
      this.#kv.remove(this.#layout.tenant(tenant, 'budget_envelope'), liveIndexId(next.budget_id, envelopeId));
    return next;
  }
}
