import { z } from 'zod';
import { CountSchema, IdSchema, MAX_TEXT_LENGTH, NameSchema, TagsSchema, TenantIdSchema, UsdSchema } from './bounds.ts';
import { microsToUsd, UuidSchema } from './common.ts';
import { TimestampSchema } from './timestamp.ts';
import {
  AlertThresholdSchema,
  BudgetLimitsSchema,
  BudgetPeriodSchema,
  BudgetStatusSchema,
  BudgetTypeSchema,
  type Budget,
} from './budget.ts';
import { budgetStatus, percents } from './budget-math.ts';

/** POST /v1/budgets (spec 2.3), with the gRPC extras name-compatible where they coincide. */
export const CreateBudgetRequestSchema = z
  .strictObject({
    tenant_id: TenantIdSchema.optional(),
    name: NameSchema,
    description: z.string().max(MAX_TEXT_LENGTH).optional(),
    type: BudgetTypeSchema,
    limits: BudgetLimitsSchema.strict().default(BudgetLimitsSchema.parse({})),
    alerts: z.array(AlertThresholdSchema).max(20).optional(),
    period: BudgetPeriodSchema.default('monthly'),
    expires_at: TimestampSchema.optional(),
    workflow_id: IdSchema.optional(),
    tags: TagsSchema.optional(),
  })
  .superRefine((req, ctx) => {
    const { limits } = req;
    if (req.type === 'cost' && limits.max_tokens !== null && limits.max_cost_usd === null) {
      ctx.addIssue({
        code: 'custom',
        path: ['limits', 'max_cost_usd'],
        message: 'a cost budget limits max_cost_usd; use type hybrid to limit tokens too',
      });
    }
    const percents = (req.alerts ?? []).map((a) => a.percent);
    if (new Set(percents).size !== percents.length) {
      ctx.addIssue({ code: 'custom', path: ['alerts'], message: 'alert percents must be distinct' });
    }
  });
export type CreateBudgetRequest = z.infer<typeof CreateBudgetRequestSchema>;

export const BudgetListQuerySchema = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  /** `warning`: active budgets past an alert threshold below 100% (spec 3.2). */
  status: z.enum(['active', 'warning', 'exhausted', 'expired', 'all']).default('all'),
});

export const BudgetCheckRequestSchema = z.strictObject({
  estimated_tokens: CountSchema.default(0),
  estimated_cost_usd: UsdSchema.default(0),
});

export const BudgetCheckResultSchema = z.object({
  allowed: z.boolean(),
  reason: z.string(),
  remaining_tokens: z.number().int().nullable(),
  remaining_cost_usd: z.number().nullable(),
  warnings: z.array(z.string()),
});

export const BudgetUsageSchema = z.object({
  tokens_used: z.number().int(),
  cost_usd: z.number(),
  executions: z.number().int(),
  percent_tokens: z.number().nullable(),
  percent_cost: z.number().nullable(),
  period_start: TimestampSchema,
  period_end: TimestampSchema.nullable(),
  tokens_input: z.number().int(),
  tokens_output: z.number().int(),
  llm_calls: z.number().int(),
  tool_calls: z.number().int(),
});
export type BudgetUsage = z.infer<typeof BudgetUsageSchema>;

export const RestBudgetSchema = z.object({
  budget_id: UuidSchema,
  tenant_id: z.string(),
  name: z.string(),
  description: z.string(),
  type: BudgetTypeSchema,
  status: BudgetStatusSchema,
  period: BudgetPeriodSchema,
  limits: BudgetLimitsSchema,
  usage: BudgetUsageSchema,
  alerts: z.array(AlertThresholdSchema),
  expires_at: TimestampSchema.nullable(),
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
});
export type RestBudget = z.infer<typeof RestBudgetSchema>;

const round = (n: number | null) => (n === null ? null : Math.round(n * 100) / 100);

export function toBudgetUsage(budget: Budget): BudgetUsage {
  const p = percents(budget);
  const u = budget.usage;
  return {
    tokens_used: u.tokens_input + u.tokens_output,
    cost_usd: microsToUsd(u.cost_micros),
    executions: u.executions,
    percent_tokens: round(p.tokens),
    percent_cost: round(p.cost),
    period_start: u.period_start,
    period_end: u.period_end,
    tokens_input: u.tokens_input,
    tokens_output: u.tokens_output,
    llm_calls: u.llm_calls,
    tool_calls: u.tool_calls,
  };
}

export function toRestBudget(budget: Budget, now: Date): RestBudget {
  return {
    budget_id: budget.budget_id,
    tenant_id: budget.tenant_id,
    name: budget.name,
    description: budget.description,
    type: budget.type,
    status: budgetStatus(budget, now),
    period: budget.period,
    limits: budget.limits,
    usage: toBudgetUsage(budget),
    alerts: budget.alerts,
    expires_at: budget.expires_at,
    created_at: budget.created_at,
    updated_at: budget.updated_at,
  };
}
