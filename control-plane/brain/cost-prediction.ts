import { predictCallCost, type PredictCostRequest, type PredictCostResponse } from '../../core/brain/index.ts';
import { normalizeModelId } from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { Readers } from '../storage/storage.ts';
import type { Pricer } from '../usage/pricer.ts';
import type { Oracle } from './oracle.ts';
import { pickRecentEvents } from './recent-events.ts';

export interface CostPredictorDeps {
  read: Readers;
  budgets: Budgets;
  oracle: Oracle;
  pricer: Pricer;
  tokens: TokenCounter;
  clock: () => Date;
  /** At most this many events are read per prediction (newest first). */
  maxEvents: number;
}

const DAY = 86_400_000;

/**
 * PredictCost: input tokens counted with tiktoken for each model (or given), the output length
 * from the `llm.call` events of the last `lookback_days` for that model (of the workflow's
 * budgets when a workflow is named), priced from the price table.
 */
export class CostPredictor {
  readonly #deps: CostPredictorDeps;

  constructor(deps: CostPredictorDeps) {
    this.#deps = deps;
  }

  async predict(tenant: string, request: PredictCostRequest): Promise<PredictCostResponse> {
    const { budgets, oracle, pricer, tokens } = this.#deps;
    const workflowBudgets =
      request.workflow_id === undefined
        ? undefined
        : (await budgets.list(tenant, 'all')).filter((b) => b.workflow_id === request.workflow_id);
    const calls = request.use_historical_data
      ? await this.#calls(
          tenant,
          this.#deps.clock().getTime() - request.lookback_days * DAY,
          new Set(request.model_ids.map(normalizeModelId)),
          workflowBudgets === undefined ? undefined : new Set(workflowBudgets.map((b) => b.budget_id)),
        )
      : [];
    const given = request.estimated_input_tokens;
    // Each model's count of the text, made on the token thread.
    const inputs =
      given === undefined
        ? await tokens.exactly(() =>
            request.model_ids.map((model) => tokens.countText(model, request.input_text ?? '')),
          )
        : request.model_ids.map(() => given);
    const predictions = request.model_ids.map((model, i) => {
      const wanted = normalizeModelId(model);
      const outputs = calls.filter((c) => c.model === wanted).map((c) => c.output);
      const input = inputs[i] as number;
      const prediction = predictCallCost(
        input,
        outputs,
        (i, o) => pricer(model, { input: i, output: o }).costMicros / 1_000_000,
      );
      return { model_id: model, sample_size: outputs.length, ...prediction };
    });
    const first = predictions[0] as (typeof predictions)[number];
    let overrun: number | null = null;
    for (const budget of workflowBudgets ?? []) {
      const p = (await oracle.predict(budget)).probability;
      if (p !== null && (overrun === null || p > overrun)) overrun = p;
    }
    const { model_id: _model, sample_size: sampleSize, ...prediction } = first;
    return {
      prediction,
      historical_based: sampleSize > 0,
      sample_size: sampleSize,
      predictions,
      overrun_probability: overrun,
    };
  }

  /**
   * The output lengths of the tenant's `llm.call` events since `since` for these models
   * (normalised), newest first, of these budgets when given.
   */
  #calls(
    tenant: string,
    since: number,
    models: ReadonlySet<string>,
    budgetIds: ReadonlySet<string> | undefined,
  ): Promise<{ model: string; output: number }[]> {
    if (budgetIds !== undefined && budgetIds.size === 0) return Promise.resolve([]);
    return pickRecentEvents(this.#deps.read, {
      tenant,
      filter: { eventType: 'llm.*' },
      since,
      maxEvents: this.#deps.maxEvents,
      pick: (event) => {
        if (event.model === null || event.tokens.output === 0 || !(Date.parse(event.timestamp) >= since))
          return undefined;
        if (budgetIds !== undefined && !budgetIds.has(event.budget_id ?? '')) return undefined;
        const model = normalizeModelId(event.model);
        return models.has(model) ? { model, output: event.tokens.output } : undefined;
      },
    });
  }
}
