import { predictCallCost, type PredictCostRequest, type PredictCostResponse } from '../../core/brain/index.ts';
import { normalizeModelId } from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Readers } from '../storage/storage.ts';
import type { Pricer } from '../usage/pricer.ts';
import type { Oracle } from './oracle.ts';

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

const PAGE = 100;
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
    const events = request.use_historical_data
      ? await this.#calls(
          tenant,
          this.#deps.clock().getTime() - request.lookback_days * DAY,
          workflowBudgets === undefined ? undefined : new Set(workflowBudgets.map((b) => b.budget_id)),
        )
      : [];
    const predictions = request.model_ids.map((model) => {
      const wanted = normalizeModelId(model);
      const outputs = events
        .filter((e) => e.model !== null && normalizeModelId(e.model) === wanted && e.tokens.output > 0)
        .map((e) => e.tokens.output);
      const input = request.estimated_input_tokens ?? tokens.countText(model, request.input_text ?? '');
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

  /** The tenant's `llm.call` events since `since`, newest first, of these budgets when given. */
  async #calls(tenant: string, since: number, budgetIds: ReadonlySet<string> | undefined): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    if (budgetIds !== undefined && budgetIds.size === 0) return out;
    let pageToken: string | null = null;
    for (let read = 0; read < this.#deps.maxEvents; read += PAGE) {
      const page = await this.#deps.read.events.list(tenant, { eventType: 'llm.*' }, { pageSize: PAGE, pageToken });
      for (const event of page.items)
        if (Date.parse(event.timestamp) >= since && (budgetIds === undefined || budgetIds.has(event.budget_id ?? '')))
          out.push(event);
      const oldest = page.items.at(-1);
      // A page may come back empty before the list ends (storage bounds the rows a filtered page reads).
      if (page.nextPageToken === null || (oldest !== undefined && Date.parse(oldest.received_at) < since)) break;
      pageToken = page.nextPageToken;
    }
    return out;
  }
}
