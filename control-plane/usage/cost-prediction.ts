import { microsToUsd } from '../../core/domain/index.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { Readers } from '../storage/storage.ts';
import type { Pricer } from './pricer.ts';
import { SUMMARY_SCAN_LIMIT } from './usage-summary.ts';

export interface PredictionRequest {
  /** At least one model; the estimate covers one call to each, and its range spans them. */
  models: readonly string[];
  inputTokens?: number | undefined;
  inputText?: string | undefined;
  workflowId?: string | undefined;
  useHistory: boolean;
  lookbackDays: number;
}

export interface Prediction {
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  cost_usd_min: number;
  cost_usd_max: number;
  confidence: number;
  confidence_level: 'low' | 'medium' | 'high';
  /** LLM calls of the lookback the output estimate rests on; 0 without history. */
  sample_size: number;
}

/**
 * The expected cost of one LLM call: input tokens as given (or counted in the text with the
 * model's tokenizer), output tokens as the tenant's recorded calls of the lookback produced on
 * average (their fewest and most bound the range), priced with the price table the metering
 * uses. Without history the output is taken equal to the input, the range from none to twice
 * that, and the confidence is low.
 */
export async function predictCost(
  deps: { read: Readers; pricer: Pricer; tokens: TokenCounter; clock: () => Date },
  tenant: string,
  request: PredictionRequest,
): Promise<Prediction> {
  const [first] = request.models;
  const input = request.inputTokens ?? deps.tokens.countText(first ?? '', request.inputText ?? '');
  const outputs = request.useHistory ? await recordedOutputs(deps, tenant, request) : [];
  const sample = outputs.length;
  const average = sample === 0 ? input : Math.round(outputs.reduce((a, b) => a + b, 0) / sample);
  const fewest = sample === 0 ? 0 : Math.min(...outputs);
  const most = sample === 0 ? input * 2 : Math.max(...outputs);
  const price = (model: string, output: number) => deps.pricer(model, { input, output }).costMicros;
  const costs = request.models.map((m) => price(m, average));
  const level = sample === 0 ? 'low' : sample < 10 ? 'medium' : 'high';
  return {
    input_tokens: input,
    output_tokens: average,
    cost_usd: microsToUsd(Math.round(costs.reduce((a, b) => a + b, 0) / costs.length)),
    cost_usd_min: microsToUsd(Math.min(...request.models.map((m) => price(m, fewest)))),
    cost_usd_max: microsToUsd(Math.max(...request.models.map((m) => price(m, most)))),
    confidence: { low: 0.3, medium: 0.6, high: 0.8 }[level],
    confidence_level: level,
    sample_size: sample,
  };
}

/** Output tokens of the tenant's LLM calls that arrived in the lookback (of the workflow, when named). */
async function recordedOutputs(
  deps: { read: Readers; clock: () => Date },
  tenant: string,
  request: PredictionRequest,
): Promise<number[]> {
  const since = deps.clock().getTime() - request.lookbackDays * 86_400_000;
  const workflows = new Map<string, string | null>();
  const outputs: number[] = [];
  let read = 0;
  let pageToken: string | null = null;
  do {
    const page = await deps.read.events.list(tenant, { eventType: 'llm.*' }, { pageSize: 100, pageToken });
    for (const event of page.items) {
      if (Date.parse(event.received_at) < since || read >= SUMMARY_SCAN_LIMIT) return outputs;
      read += 1;
      if (request.workflowId !== undefined) {
        const budget = event.budget_id;
        if (budget !== null && !workflows.has(budget))
          workflows.set(budget, (await deps.read.budgets.get(tenant, budget))?.workflow_id ?? null);
        if (budget === null || workflows.get(budget) !== request.workflowId) continue;
      }
      outputs.push(event.tokens.output);
    }
    pageToken = page.nextPageToken;
  } while (pageToken !== null);
  return outputs;
}
