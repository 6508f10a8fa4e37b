import { z } from 'zod';
import {
  BudgetPeriodSchema,
  CreateBudgetRequestSchema,
  IdSchema,
  budgetStatusWithWarning,
  MAX_USD,
  microsToUsd,
  percents,
  remaining,
  type AlertThreshold,
  type Budget,
  type CreateBudgetRequest,
} from '../../../core/domain/index.ts';
import { SvcError } from '../../../core/errors/index.ts';

/** MCP budget shapes (spec 2.9) onto the canonical budget (docs/surfaces.md). */

export const McpBudgetScopeSchema = z.enum(['GLOBAL', 'TENANT', 'WORKFLOW', 'MODEL']);
export const McpBudgetPeriodSchema = z.enum(['DAILY', 'WEEKLY', 'MONTHLY', 'QUARTERLY']);
export const McpBudgetActionSchema = z.enum(['WARN', 'SOFT_LIMIT', 'HARD_LIMIT']);
export const McpBudgetStatusSchema = z.enum(['active', 'warning', 'exceeded', 'expired']);
export type McpBudgetStatus = z.infer<typeof McpBudgetStatusSchema>;
type McpBudgetAction = z.infer<typeof McpBudgetActionSchema>;

/** What the alert at 100% does to the envelopes still running on the budget. */
const ACTION_AT_LIMIT: Record<McpBudgetAction, AlertThreshold['action']> = {
  WARN: 'warn',
  SOFT_LIMIT: 'notify',
  HARD_LIMIT: 'terminate',
};

export const McpCreateBudgetSchema = z.object({
  name: z.string().trim().min(1).max(200),
  limit_amount: z.number().positive().max(MAX_USD).describe('USD per period'),
  period: McpBudgetPeriodSchema,
  scope: McpBudgetScopeSchema.default('TENANT').describe('MODEL is not enforced per model yet and is refused'),
  scope_id: IdSchema.optional().describe('the workflow id when scope is WORKFLOW'),
  action: McpBudgetActionSchema.default('HARD_LIMIT').describe(
    'what reaching the limit does to running envelopes: HARD_LIMIT ends them, SOFT_LIMIT notifies, WARN warns',
  ),
  alert_thresholds: z
    .array(z.int().min(1).max(100))
    .max(20)
    .default([80])
    .describe('percentages of the limit that raise a warning alert'),
});

/** The canonical create request of an MCP `create_budget`; a scope it cannot enforce is refused. */
export function budgetFromMcp(input: z.output<typeof McpCreateBudgetSchema>): CreateBudgetRequest {
  const refuse = (field: string, description: string) =>
    new SvcError('SVC-SYS-9002', `invalid request: ${field}: ${description}`, {}, [{ field, description }]);
  if (input.scope === 'MODEL') throw refuse('scope', 'MODEL budgets are not supported yet; use TENANT or WORKFLOW');
  if (input.scope === 'WORKFLOW' && input.scope_id === undefined)
    throw refuse('scope_id', 'required when scope is WORKFLOW (the workflow id)');
  const warnings = [...new Set(input.alert_thresholds.filter((p) => p < 100))].sort((a, b) => a - b);
  return CreateBudgetRequestSchema.parse({
    name: input.name,
    type: 'cost',
    limits: { max_cost_usd: input.limit_amount },
    period: input.period.toLowerCase(),
    alerts: [
      ...warnings.map((percent) => ({ percent, action: 'warn' })),
      { percent: 100, action: ACTION_AT_LIMIT[input.action] },
    ],
    ...(input.scope === 'WORKFLOW' ? { workflow_id: input.scope_id } : {}),
    tags: { scope: input.scope, ...(input.scope_id !== undefined ? { scope_id: input.scope_id } : {}) },
  });
}

/** The MCP filter's names for the canonical statuses (docs/surfaces.md): exceeded = exhausted. */
export function mcpBudgetStatus(budget: Budget, now: Date): McpBudgetStatus {
  const status = budgetStatusWithWarning(budget, now);
  return status === 'exhausted' ? 'exceeded' : status;
}

export const McpBudgetStatusViewSchema = z.object({
  budget_id: z.string(),
  status: McpBudgetStatusSchema,
  spend_usd: z.number(),
  limit_usd: z.number().nullable(),
  remaining_usd: z.number().nullable(),
  percent_used: z.number(),
  tokens_used: z.int(),
  executions: z.int(),
  period_start: z.string(),
  period_end: z.string().nullable(),
});

export const McpBudgetSchema = McpBudgetStatusViewSchema.extend({
  id: z.string(),
  name: z.string(),
  scope: McpBudgetScopeSchema,
  scope_id: z.string().nullable(),
  limit_amount: z.number().nullable(),
  period: z.enum(BudgetPeriodSchema.options.map((p) => p.toUpperCase()) as [string, ...string[]]),
  action: McpBudgetActionSchema,
  alert_thresholds: z.array(z.int()),
  created_at: z.string(),
});

export function toMcpBudgetStatus(budget: Budget, now: Date): z.infer<typeof McpBudgetStatusViewSchema> {
  const left = remaining(budget);
  return {
    budget_id: budget.budget_id,
    status: mcpBudgetStatus(budget, now),
    spend_usd: microsToUsd(budget.usage.cost_micros),
    limit_usd: budget.limits.max_cost_usd,
    remaining_usd: left.cost_micros === null ? null : microsToUsd(left.cost_micros),
    percent_used: Math.round(percents(budget).highest * 100) / 100,
    tokens_used: budget.usage.tokens_input + budget.usage.tokens_output,
    executions: budget.usage.executions,
    period_start: budget.usage.period_start,
    period_end: budget.usage.period_end,
  };
}

export function toMcpBudget(budget: Budget, now: Date): z.infer<typeof McpBudgetSchema> {
  const scope = McpBudgetScopeSchema.safeParse(budget.tags.scope);
  const atLimit = budget.alerts.find((a) => a.percent === 100)?.action ?? 'terminate';
  const action = (Object.keys(ACTION_AT_LIMIT) as McpBudgetAction[]).find((k) => ACTION_AT_LIMIT[k] === atLimit);
  return {
    ...toMcpBudgetStatus(budget, now),
    id: budget.budget_id,
    name: budget.name,
    scope: scope.success ? scope.data : budget.workflow_id !== null ? 'WORKFLOW' : 'TENANT',
    scope_id: budget.workflow_id ?? budget.tags.scope_id ?? null,
    limit_amount: budget.limits.max_cost_usd,
    period: budget.period.toUpperCase(),
    action: action ?? 'HARD_LIMIT',
    alert_thresholds: budget.alerts.filter((a) => a.percent < 100).map((a) => a.percent),
    created_at: budget.created_at,
  };
}
