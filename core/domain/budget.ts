import { z } from 'zod';
import { MAX_COUNT, MAX_TEXT_LENGTH, MAX_USD } from './bounds.ts';
import { UuidSchema } from './common.ts';
import { TimestampSchema } from './timestamp.ts';

export const BudgetPeriodSchema = z.enum(['hourly', 'daily', 'weekly', 'monthly', 'total', 'quarterly']);
export type BudgetPeriod = z.infer<typeof BudgetPeriodSchema>;

export const BudgetTypeSchema = z.enum(['token', 'cost', 'hybrid']);
export const BudgetStatusSchema = z.enum(['active', 'exhausted', 'expired']);
export type BudgetStatus = z.infer<typeof BudgetStatusSchema>;

export const AlertActionSchema = z.enum(['notify', 'warn', 'terminate']);

export const AlertThresholdSchema = z.object({
  percent: z.number().int().min(1).max(100),
  action: AlertActionSchema.default('notify'),
  webhook_url: z
    .url({ protocol: /^https?$/ })
    .max(MAX_TEXT_LENGTH)
    .optional(),
});
export type AlertThreshold = z.infer<typeof AlertThresholdSchema>;

export const DEFAULT_ALERTS: readonly AlertThreshold[] = [
  { percent: 80, action: 'warn' },
  { percent: 100, action: 'terminate' },
];

/** null means unlimited (spec 8). The gRPC extras are optional on REST. */
export const BudgetLimitsSchema = z.object({
  max_tokens: z.number().int().positive().max(MAX_COUNT).nullable().default(null),
  max_cost_usd: z.number().positive().max(MAX_USD).nullable().default(null),
  max_executions: z.number().int().positive().max(MAX_COUNT).nullable().default(null),
  max_input_tokens: z.number().int().positive().max(MAX_COUNT).nullable().default(null),
  max_output_tokens: z.number().int().positive().max(MAX_COUNT).nullable().default(null),
  max_llm_calls: z.number().int().positive().max(MAX_COUNT).nullable().default(null),
  max_tool_calls: z.number().int().positive().max(MAX_COUNT).nullable().default(null),
});
export type BudgetLimits = z.infer<typeof BudgetLimitsSchema>;

/** Every limit unlimited: the base a budget's own limits are spread over. */
export const NO_LIMITS: BudgetLimits = BudgetLimitsSchema.parse({});

/** Usage of the current period, with cost in micro-dollars and the thresholds already fired. */
export const PeriodUsageSchema = z.object({
  period_start: TimestampSchema,
  period_end: TimestampSchema.nullable(),
  tokens_input: z.number().int().nonnegative(),
  tokens_output: z.number().int().nonnegative(),
  cost_micros: z.number().int().nonnegative(),
  executions: z.number().int().nonnegative(),
  llm_calls: z.number().int().nonnegative(),
  tool_calls: z.number().int().nonnegative(),
  alerts_fired: z.array(z.number().int()),
});
export type PeriodUsage = z.infer<typeof PeriodUsageSchema>;

export const BudgetSchema = z.object({
  budget_id: UuidSchema,
  tenant_id: z.string(),
  name: z.string(),
  description: z.string(),
  type: BudgetTypeSchema,
  period: BudgetPeriodSchema,
  limits: BudgetLimitsSchema,
  alerts: z.array(AlertThresholdSchema),
  expires_at: TimestampSchema.nullable(),
  workflow_id: z.string().nullable(),
  tags: z.record(z.string(), z.string()),
  usage: PeriodUsageSchema,
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
});
export type Budget = z.infer<typeof BudgetSchema>;
