import { randomUUID } from 'node:crypto';
import { SvcError } from '../../core/errors/index.ts';
import {
  budgetStatus,
  checkBudget,
  DEFAULT_ALERTS,
  freshUsage,
  microsToUsd,
  rollOver,
  usdToMicros,
  type Budget,
  type BudgetStatus,
  type CheckOutcome,
  type CreateBudgetRequest,
} from '../../core/domain/index.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import { noEffects } from '../effects/effects.ts';
import type { Store } from '../store/store.ts';
import { budgetError } from './budget-errors.ts';

export interface BudgetDeps {
  store: Store;
  /** Why an alert's webhook URL may not be stored, or null (WebhookTargets.problemWith). */
  webhookUrlProblem: (url: string) => string | null;
  audit: AuditLog;
  effects: EffectDispatcher;
  clock: () => Date;
}

/** Budgets: create, read, list, check, and the execution reservation envelope creation makes. */
export class Budgets {
  private readonly deps: BudgetDeps;

  constructor(deps: BudgetDeps) {
    this.deps = deps;
  }

  async create(caller: Caller, request: CreateBudgetRequest): Promise<Budget> {
    const now = this.deps.clock();
    if (request.expires_at !== undefined && Date.parse(request.expires_at) <= now.getTime()) {
      throw new SvcError('SVC-SYS-9002', 'invalid request: expires_at: must lie in the future', {}, [
        { field: 'expires_at', description: 'must lie in the future' },
      ]);
    }
    const refused = (request.alerts ?? []).flatMap((alert, i) => {
      const problem = alert.webhook_url === undefined ? null : this.deps.webhookUrlProblem(alert.webhook_url);
      return problem === null ? [] : [{ field: `alerts.${i}.webhook_url`, description: problem }];
    });
    if (refused.length > 0) {
      throw new SvcError(
        'SVC-SYS-9002',
        `invalid request: ${refused.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
        { fields: refused.map((v) => v.field).join(', ') },
        refused,
      );
    }
    const base = { period: request.period, created_at: now.toISOString() };
    const budget: Budget = {
      budget_id: randomUUID(),
      tenant_id: caller.tenant,
      name: request.name,
      description: request.description ?? '',
      type: request.type,
      period: request.period,
      limits: request.limits,
      alerts: request.alerts ?? [...DEFAULT_ALERTS],
      expires_at: request.expires_at ?? null,
      workflow_id: request.workflow_id ?? null,
      tags: request.tags ?? {},
      usage: freshUsage(base, now),
      created_at: base.created_at,
      updated_at: base.created_at,
    };
    this.deps.store.transaction(() => {
      this.deps.store.put(caller.tenant, 'budget', budget.budget_id, budget);
      this.deps.audit.append(caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'budget.create',
        resource: { type: 'budget', id: budget.budget_id },
        result: 'created',
        metadata: { name: budget.name, limits: budget.limits },
      });
    });
    await this.deps.effects.dispatch({
      ...noEffects(),
      changes: [{ kind: 'budget', tenant: caller.tenant, budgetId: budget.budget_id }],
    });
    return budget;
  }

  /** The budget as of now (usage rolled into the current period), or SVC-BUD-3002. */
  get(tenant: string, budgetId: string): Budget {
    const budget = this.find(tenant, budgetId);
    if (budget === undefined)
      throw new SvcError('SVC-BUD-3002', `budget ${budgetId} not found`, { budget_id: budgetId });
    return budget;
  }

  find(tenant: string, budgetId: string): Budget | undefined {
    const stored = this.deps.store.get<Budget>(tenant, 'budget', budgetId);
    return stored === undefined ? undefined : rollOver(stored, this.deps.clock());
  }

  list(tenant: string, status: BudgetStatus | 'all'): Budget[] {
    const now = this.deps.clock();
    const out: Budget[] = [];
    for (const stored of this.deps.store.list<Budget>(tenant, 'budget')) {
      const budget = rollOver(stored, now);
      if (status === 'all' || budgetStatus(budget, now) === status) out.push(budget);
    }
    return out;
  }

  /** Current-period spend of every budget of these tenants, for the budget usage gauge. */
  *spendByBudget(
    tenants: Iterable<string>,
  ): Generator<{ tenant_id: string; budget_id: string; usd: number; limit_usd: number | null }> {
    for (const tenant of tenants) {
      for (const budget of this.list(tenant, 'all'))
        yield {
          tenant_id: tenant,
          budget_id: budget.budget_id,
          usd: microsToUsd(budget.usage.cost_micros),
          limit_usd: budget.limits.max_cost_usd,
        };
    }
  }

  check(
    tenant: string,
    budgetId: string,
    estimate: { estimated_tokens: number; estimated_cost_usd: number },
  ): CheckOutcome {
    return checkBudget(
      this.get(tenant, budgetId),
      { tokens: estimate.estimated_tokens, cost_micros: usdToMicros(estimate.estimated_cost_usd) },
      this.deps.clock(),
    );
  }

  /**
   * Inside the envelope-creation transaction: refuse an expired, exhausted or full budget with a
   * BudgetError, else count one more execution in the current period.
   */
  reserveExecution(tenant: string, budgetId: string): Budget {
    const now = this.deps.clock();
    const budget = this.find(tenant, budgetId);
    if (budget === undefined) {
      throw new SvcError(
        'SVC-BUD-3005',
        `budget ${budgetId} is not a budget of this tenant`,
        { budget_id: budgetId, current_usage: 0, current: 0, limit: 0 },
        [{ field: 'budget_id', description: 'no such budget in this tenant' }],
      );
    }
    const status = budgetStatus(budget, now);
    if (status === 'expired')
      throw budgetError('SVC-BUD-3003', budget, `budget ${budgetId} expired at ${budget.expires_at}`);
    if (status === 'exhausted')
      throw budgetError('SVC-BUD-3001', budget, `budget ${budgetId} is exhausted for the current period`);
    const { max_executions } = budget.limits;
    if (max_executions !== null && budget.usage.executions >= max_executions) {
      throw budgetError('SVC-BUD-3004', budget, `budget ${budgetId} allows ${max_executions} executions per period`);
    }
    const updated: Budget = {
      ...budget,
      usage: { ...budget.usage, executions: budget.usage.executions + 1 },
      updated_at: now.toISOString(),
    };
    this.deps.store.put(tenant, 'budget', budgetId, updated);
    return updated;
  }

  save(tenant: string, budget: Budget): void {
    this.deps.store.put(tenant, 'budget', budget.budget_id, budget);
  }
}
