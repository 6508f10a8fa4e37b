import {
  budgetStatusWithWarning,
  CreateBudgetRequestSchema,
  microsToUsd,
  percents,
  remaining,
  type Budget,
  type PeriodUsage,
} from '../../../core/domain/index.ts';
import { PredictCostRequestSchema } from '../../../core/brain/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import type { CostPredictor } from '../../brain/cost-prediction.ts';
import type { Budgets } from '../../budgets/budgets.ts';
import type { Envelopes } from '../../envelopes/envelopes.ts';
import type { Readers } from '../../storage/storage.ts';
import { summariseSpend, type Spend as UsageSpend, type SpendGroup } from '../../usage/usage-summary.ts';
import { pageOldestFirst } from '../../storage/paging.ts';
import { grpcNextPageToken, grpcPageRequest } from '../codec/paging.ts';
import { renamedFields } from '../codec/renamed-fields.ts';
import { enumValue, fromTimestamp, invalidField, present, requiredId, toTimestamp } from '../codec/well-known.ts';
import type { GrpcServiceHandlers } from '../server.ts';
import { toGrpcCostSummary } from './envelope-service.ts';

type Message = Record<string, unknown>;

/** A spend summary without start_time covers the 30 days before its end. */
const DEFAULT_SPEND_WINDOW_MS = 30 * 86_400_000;

const STATUS_TYPE = { active: 'ACTIVE', warning: 'WARNING', exhausted: 'EXCEEDED', expired: 'EXPIRED' } as const;
const LIMITS = [
  'max_tokens',
  'max_input_tokens',
  'max_output_tokens',
  'max_cost_usd',
  'max_llm_calls',
  'max_tool_calls',
  'max_executions',
] as const;

function spendOf(usage: PeriodUsage) {
  return {
    total_tokens: usage.tokens_input + usage.tokens_output,
    total_cost_usd: microsToUsd(usage.cost_micros),
    total_llm_calls: usage.llm_calls,
    total_tool_calls: usage.tool_calls,
    total_input_tokens: usage.tokens_input,
    total_output_tokens: usage.tokens_output,
    total_executions: usage.executions,
  };
}

function limitsOf(limits: Budget['limits']) {
  return Object.fromEntries(LIMITS.flatMap((key) => (limits[key] === null ? [] : [[key, limits[key]]])));
}

/** The canonical budget as svc.cost.v1.Budget, its status with the warning level. */
export function toGrpcBudget(budget: Budget, now: Date) {
  return {
    budget_id: budget.budget_id,
    tenant_id: budget.tenant_id,
    workflow_id: budget.workflow_id ?? '',
    limits: limitsOf(budget.limits),
    thresholds: budget.alerts.map((a) => ({
      threshold_percent: a.percent,
      action: `THRESHOLD_ACTION_${a.action.toUpperCase()}`,
      webhook_url: a.webhook_url ?? '',
    })),
    period: {
      period_type: `BUDGET_PERIOD_TYPE_${budget.period.toUpperCase()}`,
      current_start: toTimestamp(budget.usage.period_start),
      current_end: toTimestamp(budget.usage.period_end),
    },
    name: budget.name,
    description: budget.description,
    tags: budget.tags,
    type: `BUDGET_TYPE_${budget.type.toUpperCase()}`,
    expires_at: toTimestamp(budget.expires_at),
    status: `BUDGET_STATUS_TYPE_${STATUS_TYPE[budgetStatusWithWarning(budget, now)]}`,
    current_spend: spendOf(budget.usage),
    created_at: toTimestamp(budget.created_at),
    updated_at: toTimestamp(budget.updated_at),
  };
}

/**
 * A gRPC Budget as the canonical create request. UNSPECIFIED type follows the limits (COST when
 * max_cost_usd is the only one, TOKEN without it, HYBRID otherwise); an empty name becomes
 * `budget`; max_execution_time_seconds is refused, since nothing would enforce it.
 */
function budgetCreateInput(budget: Message | null) {
  if (budget === null) throw invalidField('budget', 'required');
  const given = (budget.limits ?? null) as Message | null;
  if (given === null) throw invalidField('budget.limits', 'required');
  if (given.max_execution_time_seconds !== undefined)
    throw invalidField('budget.limits.max_execution_time_seconds', 'not enforced by this version; leave it unset');
  const limits = Object.fromEntries(
    LIMITS.flatMap((key) => (given[key] === undefined ? [] : [[key, Number(given[key])]])),
  );
  const costOnly = Object.keys(limits).length === 1 && 'max_cost_usd' in limits;
  const type =
    enumValue(budget.type, 'BUDGET_TYPE_')?.toLowerCase() ??
    (costOnly ? 'cost' : !('max_cost_usd' in limits) ? 'token' : 'hybrid');
  const alerts = (budget.thresholds as Message[]).map((t, i) => {
    const percent = t.threshold_percent as number;
    if (!Number.isInteger(percent) || percent < 1 || percent > 100)
      throw invalidField(`budget.thresholds.${i}.threshold_percent`, 'must be an integer from 1 to 100');
    return {
      percent,
      action: enumValue(t.action, 'THRESHOLD_ACTION_')?.toLowerCase() ?? 'notify',
      ...(present(t.webhook_url) === undefined ? {} : { webhook_url: t.webhook_url }),
    };
  });
  const period = (budget.period ?? null) as Message | null;
  const expiresAt = fromTimestamp(budget.expires_at, 'budget.expires_at');
  return renamedFields(
    { alerts: 'thresholds' },
    () =>
      parseOrThrow(
        CreateBudgetRequestSchema,
        {
          name: present(budget.name) ?? 'budget',
          ...(present(budget.description) === undefined ? {} : { description: budget.description }),
          type,
          limits,
          ...(alerts.length === 0 ? {} : { alerts }),
          ...(period === null ? {} : { period: enumValue(period.period_type, 'BUDGET_PERIOD_TYPE_')?.toLowerCase() }),
          ...(expiresAt === undefined ? {} : { expires_at: expiresAt }),
          ...(present(budget.workflow_id) === undefined ? {} : { workflow_id: budget.workflow_id }),
          tags: budget.tags,
        },
        'request',
      ),
    'budget.',
  );
}

/** The budget fields an update_mask may name (a limit alone as `limits.<name>`); empty names them all. */
const UPDATABLE = ['name', 'description', 'type', 'limits', 'thresholds', 'expires_at', 'workflow_id', 'tags'] as const;

/**
 * The whole budget an UpdateBudgetRequest asks for, as a create request: the masked fields of the
 * given budget laid over the stored one, so that each is validated as on create.
 */
function budgetUpdateInput(stored: Message, request: Message) {
  const given = request.budget as Message;
  const paths = ((request.update_mask as { paths?: string[] } | null)?.paths ?? []).map((p) => p.trim());
  const merged: Message = { ...stored, limits: { ...(stored.limits as Message) } };
  for (const path of paths.length === 0 ? UPDATABLE : paths) {
    const [field = '', limit] = path.split('.');
    if (field === 'limits' && limit !== undefined && (LIMITS as readonly string[]).includes(limit)) {
      const value = (given.limits as Message | null)?.[limit];
      if (value === undefined) delete (merged.limits as Message)[limit];
      else (merged.limits as Message)[limit] = value;
    } else if ((UPDATABLE as readonly string[]).includes(field) && limit === undefined) {
      merged[field] = given[field];
    } else {
      throw invalidField('update_mask', `${path} cannot be changed; one of ${UPDATABLE.join(', ')} or limits.<limit>`);
    }
  }
  // An empty mask replaces the budget; the period stays unless the request names the same one.
  if (paths.length === 0 && given.period !== null) merged.period = given.period;
  return budgetCreateInput(merged);
}

function budgetStatusOf(budget: Budget, now: Date) {
  const used = percents(budget);
  const left = remaining(budget);
  const { usage, limits } = budget;
  const percentOf = (value: number, limit: number | null) =>
    limit === null ? undefined : Math.round((value / limit) * 10_000) / 100;
  const next = budget.alerts
    .filter((a) => a.percent > used.highest && !usage.alerts_fired.includes(a.percent))
    .sort((a, b) => a.percent - b.percent)[0];
  const optional = (key: string, value: number | undefined | null) =>
    value === undefined || value === null ? {} : { [key]: value };
  return {
    budget_id: budget.budget_id,
    status: `BUDGET_STATUS_TYPE_${STATUS_TYPE[budgetStatusWithWarning(budget, now)]}`,
    ...optional('token_usage_percent', used.tokens),
    ...optional('cost_usage_percent', used.cost),
    ...optional('llm_call_usage_percent', percentOf(usage.llm_calls, limits.max_llm_calls)),
    ...optional('tool_call_usage_percent', percentOf(usage.tool_calls, limits.max_tool_calls)),
    remaining: {
      ...optional('max_tokens', left.tokens),
      ...optional('max_cost_usd', left.cost_micros === null ? null : microsToUsd(left.cost_micros)),
      ...optional('max_executions', left.executions),
    },
    current_spend: spendOf(usage),
    next_threshold:
      next === undefined
        ? null
        : {
            threshold_percent: next.percent,
            action: `THRESHOLD_ACTION_${next.action.toUpperCase()}`,
            webhook_url: next.webhook_url ?? '',
          },
  };
}

/** svc.cost.v1.CostService over the budget and envelope services REST uses. */
export function costService(deps: {
  budgets: Budgets;
  envelopes: Envelopes;
  read: Readers;
  costs: CostPredictor;
  clock: () => Date;
}): GrpcServiceHandlers {
  const { budgets, envelopes, read, clock } = deps;
  return {
    CreateBudget: {
      access: 'budgets:write',
      tenantField: 'budget.tenant_id',
      handle: async (request, { caller }) => ({
        budget: toGrpcBudget(
          await budgets.create(caller, budgetCreateInput(request.budget as Message | null)),
          clock(),
        ),
      }),
    },
    GetBudget: {
      access: 'budgets:read',
      handle: async (request, { caller }) => ({
        budget: toGrpcBudget(await budgets.get(caller.tenant, requiredId(request, 'budget_id')), clock()),
      }),
    },
    UpdateBudget: {
      access: 'budgets:write',
      tenantField: 'budget.tenant_id',
      handle: async (request, { caller }) => {
        if (request.budget === null) throw invalidField('budget', 'required');
        const budgetId = requiredId(request.budget as Message, 'budget_id');
        const updated = await budgets.update(caller, budgetId, (current) =>
          budgetUpdateInput(toGrpcBudget(current, clock()), request),
        );
        return { budget: toGrpcBudget(updated, clock()) };
      },
    },
    DeleteBudget: {
      access: 'budgets:write',
      statuses: { 409: 'an envelope on the budget has not ended, or a proxy holds a lease of it (SVC-BUD-3006)' },
      handle: async (request, { caller }) => {
        await budgets.remove(caller, requiredId(request, 'budget_id'));
        return {};
      },
    },
    ListBudgets: {
      access: 'budgets:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const now = clock();
        const status = enumValue(request.status, 'BUDGET_STATUS_TYPE_');
        const workflow = present(request.workflow_id);
        const listed = (await budgets.list(caller.tenant, 'all')).filter(
          (b) =>
            (workflow === undefined || b.workflow_id === workflow) &&
            (status === undefined || STATUS_TYPE[budgetStatusWithWarning(b, now)] === status),
        );
        const page = pageOldestFirst('budgets', listed, grpcPageRequest(request), (b) => b.budget_id);
        return { budgets: page.items.map((b) => toGrpcBudget(b, now)), next_page_token: grpcNextPageToken(page) };
      },
    },
    GetCostSummary: {
      access: 'envelopes:read',
      handle: async (request, { caller }) => ({
        cost_summary: toGrpcCostSummary((await envelopes.get(caller.tenant, requiredId(request, 'envelope_id'))).cost),
      }),
    },
    GetSpendSummary: {
      access: 'budgets:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const end = fromTimestamp(request.end_time, 'end_time') ?? clock().toISOString();
        const start =
          fromTimestamp(request.start_time, 'start_time') ??
          new Date(Date.parse(end) - DEFAULT_SPEND_WINDOW_MS).toISOString();
        if (Date.parse(start) >= Date.parse(end)) throw invalidField('start_time', 'must be before end_time');
        const groupBy = enumValue(request.group_by, 'SPEND_GROUP_BY_')?.toLowerCase() as SpendGroup | undefined;
        const workflowId = present(request.workflow_id);
        const summary = await summariseSpend(read, caller.tenant, {
          start: new Date(start),
          end: new Date(end),
          workflowId,
          groupBy,
        });
        const spend = (s: UsageSpend) => ({
          total_tokens: s.tokens_input + s.tokens_output,
          total_cost_usd: microsToUsd(s.cost_micros),
          total_llm_calls: s.llm_calls,
          total_tool_calls: s.tool_calls,
          total_input_tokens: s.tokens_input,
          total_output_tokens: s.tokens_output,
          total_executions: s.executions,
        });
        return {
          spend_summary: {
            tenant_id: caller.tenant,
            workflow_id: workflowId ?? '',
            start_time: toTimestamp(start),
            end_time: toTimestamp(end),
            group_by: request.group_by,
            total: spend(summary.total),
            groups: summary.groups.map((g) => ({ key: g.key, spend: spend(g.spend) })),
            truncated: summary.truncated,
          },
        };
      },
    },
    GetBudgetStatus: {
      access: 'budgets:read',
      handle: async (request, { caller }) => ({
        status: budgetStatusOf(await budgets.get(caller.tenant, requiredId(request, 'budget_id')), clock()),
      }),
    },
    PredictCost: {
      largeRequest: true,
      access: 'budgets:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        // Proto3 zero values mean "not given": no text, tokens counted from the text, the default lookback.
        const given = Number(request.estimated_input_tokens);
        const parsed = parseOrThrow(
          PredictCostRequestSchema,
          {
            model_ids: (request.model_ids as string[]).map((m) => m.trim()).filter((m) => m !== ''),
            ...(present(request.workflow_id) === undefined ? {} : { workflow_id: request.workflow_id }),
            ...(request.input_text === '' ? {} : { input_text: request.input_text }),
            ...(given === 0 ? {} : { estimated_input_tokens: given }),
            use_historical_data: request.use_historical_data === true,
            ...(request.lookback_days === 0 ? {} : { lookback_days: request.lookback_days }),
          },
          'request',
        );
        const { prediction, historical_based, sample_size } = await deps.costs.predict(caller.tenant, parsed);
        return { prediction, historical_based, sample_size };
      },
    },
  };
}
