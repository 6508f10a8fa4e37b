import { z } from 'zod';
import { IdSchema, NameSchema, TenantIdSchema } from '../../domain/index.ts';

/** POST /v1/costs/predict (CostService.PredictCost): what a prospective call will cost. */
export const PredictCostRequestSchema = z
  .strictObject({
    tenant_id: TenantIdSchema.optional(),
    /** History from the calls of this workflow's budgets only; all of the tenant's when absent. */
    workflow_id: IdSchema.optional(),
    /** The prompt: its input tokens are counted with tiktoken for each model. Bounded to fit the body limit. */
    input_text: z.string().max(262_144).optional(),
    /** Input tokens when the text is not given (or to override its count). */
    estimated_input_tokens: z.number().int().nonnegative().max(100_000_000).optional(),
    model_ids: z.array(NameSchema).min(1).max(20),
    use_historical_data: z.boolean().default(true),
    lookback_days: z.number().int().min(1).max(90).default(7),
  })
  .refine((r) => r.input_text !== undefined || r.estimated_input_tokens !== undefined, {
    path: ['input_text'],
    message: 'give input_text or estimated_input_tokens',
  });
export type PredictCostRequest = z.infer<typeof PredictCostRequestSchema>;

export const CostPredictionSchema = z.object({
  estimated_input_tokens: z.number().int(),
  estimated_output_tokens: z.number().int(),
  estimated_total_tokens: z.number().int(),
  estimated_cost_usd: z.number(),
  /** With the 10th and the 90th percentile of the recorded output lengths. */
  estimated_cost_usd_min: z.number(),
  estimated_cost_usd_max: z.number(),
  confidence: z.number().min(0).max(1),
  confidence_level: z.enum(['low', 'medium', 'high']),
  estimated_duration_seconds: z.number(),
});
export type CostPrediction = z.infer<typeof CostPredictionSchema>;

export const PredictCostResponseSchema = z.object({
  /** The prediction for the first of `model_ids`. */
  prediction: CostPredictionSchema,
  historical_based: z.boolean(),
  sample_size: z.number().int(),
  /** One per model of `model_ids`, in their order. */
  predictions: z.array(CostPredictionSchema.extend({ model_id: z.string(), sample_size: z.number().int() })),
  /** The highest probability of an overrun among the workflow's budgets (the Oracle), null without any. */
  overrun_probability: z.number().min(0).max(1).nullable(),
});
export type PredictCostResponse = z.infer<typeof PredictCostResponseSchema>;

/** Output length of a call when no history says otherwise. */
export const DEFAULT_OUTPUT_TOKENS = 500;
/** Output tokens per second assumed for the duration, plus a first-byte delay. */
const TOKENS_PER_SECOND = 50;
const FIRST_BYTE_SECONDS = 0.5;

/**
 * One model's prediction from its input tokens and the output lengths its recorded calls had:
 * their mean, and the 10th and 90th percentile for the range. Without history: a default output
 * of 500 tokens, the range 0 to four times that, low confidence.
 */
export function predictCallCost(
  inputTokens: number,
  outputs: readonly number[],
  priceUsd: (input: number, output: number) => number,
): CostPrediction {
  const sorted = [...outputs].sort((a, b) => a - b);
  const n = sorted.length;
  const quantile = (q: number) => sorted[Math.min(n - 1, Math.floor(q * n))] as number;
  const mean = n === 0 ? DEFAULT_OUTPUT_TOKENS : Math.round(sorted.reduce((s, v) => s + v, 0) / n);
  const low = n === 0 ? 0 : quantile(0.1);
  const high = n === 0 ? DEFAULT_OUTPUT_TOKENS * 4 : quantile(0.9);
  const [confidence, level] =
    n >= 30 ? [0.9, 'high' as const] : n >= 5 ? [0.7, 'medium' as const] : [0.4, 'low' as const];
  const round = (usd: number) => Math.round(usd * 1e8) / 1e8;
  return {
    estimated_input_tokens: inputTokens,
    estimated_output_tokens: mean,
    estimated_total_tokens: inputTokens + mean,
    estimated_cost_usd: round(priceUsd(inputTokens, mean)),
    estimated_cost_usd_min: round(priceUsd(inputTokens, low)),
    estimated_cost_usd_max: round(priceUsd(inputTokens, Math.max(high, mean))),
    confidence,
    confidence_level: level,
    estimated_duration_seconds: Math.round((FIRST_BYTE_SECONDS + mean / TOKENS_PER_SECOND) * 100) / 100,
  };
}
