import { z } from 'zod';
import { IdSchema, TenantIdSchema, TimestampSchema } from '../../domain/index.ts';
import { predictOverrun, type OverrunPrediction } from './overrun.ts';

const MAX_WORKLOAD_CALLS = 100_000;

/** A workload described inline: a limit, what is spent, the period, and the calls seen so far. */
export const WorkloadModelSchema = z
  .strictObject({
    limit: z.number().positive(),
    spent: z.number().nonnegative(),
    period_start: TimestampSchema,
    period_end: TimestampSchema,
    /** Calls of the period so far, each its time and what it spent in the limit's unit. */
    calls: z.array(z.strictObject({ at: TimestampSchema, amount: z.number().nonnegative() })).max(MAX_WORKLOAD_CALLS),
    /** The moment of the prediction; the service's clock when absent. */
    now: TimestampSchema.optional(),
  })
  .refine((w) => Date.parse(w.period_end) > Date.parse(w.period_start), {
    path: ['period_end'],
    message: 'must be after period_start',
  });

/** POST /v1/brain/oracle/predict-overrun: a stored budget or envelope (its history), or a workload model. */
export const PredictOverrunRequestSchema = z
  .strictObject({
    tenant_id: TenantIdSchema.optional(),
    budget_id: IdSchema.optional(),
    envelope_id: IdSchema.optional(),
    workload: WorkloadModelSchema.optional(),
  })
  .refine((r) => [r.budget_id, r.envelope_id, r.workload].filter((v) => v !== undefined).length === 1, {
    path: ['budget_id'],
    message: 'give exactly one of budget_id, envelope_id and workload',
  });
export type PredictOverrunRequest = z.infer<typeof PredictOverrunRequestSchema>;

export const OverrunDimensionSchema = z.enum(['cost_usd', 'tokens', 'workload']);

export const PredictOverrunResponseSchema = z.object({
  budget_id: z.string().nullable(),
  /** Set when the prediction is about an envelope (its lifetime, its own limits). */
  envelope_id: z.string().nullable(),
  /** The limit the prediction is about: the one most likely to run over. */
  dimension: OverrunDimensionSchema,
  limit: z.number(),
  spent: z.number(),
  /** P(the limit is reached before period_end); null when the history is too thin (see method). */
  probability: z.number().min(0).max(1).nullable(),
  expected_spend_at_end: z.number(),
  /** 5th and 95th percentile of the spend at period_end. */
  spend_low: z.number(),
  spend_high: z.number(),
  expected_exhaustion_at: TimestampSchema.nullable(),
  calls_per_hour_now: z.number(),
  trend: z.enum(['steady', 'accelerating', 'slowing']),
  sample_size: z.number().int(),
  /** Periods of history that shaped the usual intensity over the period (0: none). */
  history_periods: z.number().int(),
  method: z.enum(['exhausted', 'normal', 'monte_carlo', 'insufficient_data', 'no_period_end', 'no_limit']),
  period_start: TimestampSchema,
  period_end: TimestampSchema.nullable(),
});
export type PredictOverrunResponse = z.infer<typeof PredictOverrunResponseSchema>;

/** The response for one prediction. */
export function overrunResponse(
  prediction: OverrunPrediction,
  about: {
    budgetId: string | null;
    envelopeId: string | null;
    dimension: z.infer<typeof OverrunDimensionSchema>;
    limit: number;
    spent: number;
    periodStart: number;
    periodEnd: number;
    historyPeriods: number;
  },
): PredictOverrunResponse {
  const round = (n: number) => Math.round(n * 1e6) / 1e6;
  return {
    budget_id: about.budgetId,
    envelope_id: about.envelopeId,
    dimension: about.dimension,
    limit: about.limit,
    spent: round(about.spent),
    probability: prediction.probability === null ? null : round(prediction.probability),
    expected_spend_at_end: round(prediction.expectedSpendAtEnd),
    spend_low: round(prediction.spendLow),
    spend_high: round(prediction.spendHigh),
    expected_exhaustion_at:
      prediction.expectedExhaustionAt === null ? null : new Date(prediction.expectedExhaustionAt).toISOString(),
    calls_per_hour_now: round(prediction.callsPerHourNow),
    trend: prediction.trend,
    sample_size: prediction.sampleSize,
    history_periods: about.historyPeriods,
    method: prediction.method,
    period_start: new Date(about.periodStart).toISOString(),
    period_end: new Date(about.periodEnd).toISOString(),
  };
}

/** Predicts for a workload given inline. */
export function predictWorkload(
  workload: z.infer<typeof WorkloadModelSchema>,
  clock: () => Date,
): PredictOverrunResponse {
  const periodStart = Date.parse(workload.period_start);
  const periodEnd = Date.parse(workload.period_end);
  const now = Math.min(workload.now === undefined ? clock().getTime() : Date.parse(workload.now), periodEnd);
  const prediction = predictOverrun({
    limit: workload.limit,
    spent: workload.spent,
    now,
    periodStart,
    periodEnd,
    calls: workload.calls.map((c) => ({ at: Date.parse(c.at), amount: c.amount })),
    windowStart: periodStart,
  });
  return overrunResponse(prediction, {
    budgetId: null,
    envelopeId: null,
    dimension: 'workload',
    limit: workload.limit,
    spent: workload.spent,
    periodStart,
    periodEnd,
    historyPeriods: 0,
  });
}
