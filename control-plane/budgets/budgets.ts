import { randomUUID } from 'node:crypto';
import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { BudgetDeletedMessage } from '../../core/events/messages.ts';
import {
  budgetStatus,
  budgetStatusWithWarning,
  checkBudget,
  currentPeriod,
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
import type { BudgetSpend } from '../observability/metrics.ts';
import { collectPages } from '../storage/paging.ts';
import type { BudgetDefinition, Readers, Repositories, Storage } from '../storage/storage.ts';
import { budgetError, budgetNotFound } from './budget-errors.ts';

export interface BudgetDeps {
  storage: Storage;
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

  /**
   * The definition a create (or update) request gives, refused naming the field when it expires in
   * the past or alerts a webhook URL that may not be called.
   */
  private definitionOf(request: CreateBudgetRequest, now: Date): BudgetDefinition {
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
    return {
      name: request.name,
      description: request.description ?? '',
      type: request.type,
      limits: request.limits,
      alerts: request.alerts ?? [...DEFAULT_ALERTS],
      expires_at: request.expires_at ?? null,
      workflow_id: request.workflow_id ?? null,
      tags: request.tags ?? {},
    };
  }

  async create(caller: Caller, request: CreateBudgetRequest): Promise<Budget> {
    const now = this.deps.clock();
    const definition = this.definitionOf(request, now);
    const base = { period: request.period, created_at: now.toISOString() };
    const budget: Budget = {
      budget_id: randomUUID(),
      tenant_id: caller.tenant,
      ...definition,
      period: request.period,
      usage: freshUsage(base, now),
      created_at: base.created_at,
      updated_at: base.created_at,
    };
    await this.deps.effects.commit(async (tx, effects) => {
      await this.insert(tx, caller.tenant, budget);
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'budget.create',
        resource: { type: 'budget', id: budget.budget_id },
        result: 'created',
        metadata: { name: budget.name, limits: budget.limits },
      });
      effects.changes.push({ kind: 'budget', tenant: caller.tenant, budgetId: budget.budget_id });
    });
    return budget;
  }

  /**
   * Gives a budget a new definition: `revise` states the whole budget as a create request would,
   * from the budget as it stands (its period must stay the budget's). It runs in the transaction
   * on the budget held for it, so two updates of different fields both stand, neither written
   * over the state before the other. The usage of the period stays; proxies receive the new
   * limits with the budget's state.
   */
  async update(caller: Caller, budgetId: string, revise: (current: Budget) => CreateBudgetRequest): Promise<Budget> {
    const now = this.deps.clock();
    return this.deps.effects.commit(async (tx, effects) => {
      const stored = await tx.budgets.getForUpdate(caller.tenant, budgetId);
      if (stored === undefined) throw budgetNotFound(budgetId);
      const current = rollOver(stored, now);
      const request = revise(current);
      if (request.period !== current.period)
        throw new SvcError('SVC-SYS-9002', 'invalid request: period: a budget keeps its period', {}, [
          { field: 'period', description: `must stay ${current.period}; create another budget for another period` },
        ]);
      const definition = this.definitionOf(request, now);
      const updated = await tx.budgets.redefine(caller.tenant, budgetId, definition, now.toISOString());
      if (updated === undefined) throw budgetNotFound(budgetId);
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'budget.update',
        resource: { type: 'budget', id: budgetId },
        result: 'updated',
        metadata: { name: updated.name, limits: updated.limits },
      });
      effects.changes.push({ kind: 'budget', tenant: caller.tenant, budgetId });
      return rollOver(updated, now);
    });
  }

  /**
   * Deletes a budget nothing is charged to any more. Refused with SVC-BUD-3006 while an envelope
   * on it has not ended or a proxy holds a lease of it: deleting then would leave spend that no
   * budget limits. Once deleted, its state leaves the proxies' bucket and a lease request for it
   * is refused with SVC-BUD-3002, so a proxy still configured for it refuses calls (fail closed).
   */
  async remove(caller: Caller, budgetId: string): Promise<void> {
    await this.deps.effects.commit(async (tx, effects) => {
      const now = this.deps.clock().toISOString();
      const budget = await tx.budgets.getForUpdate(caller.tenant, budgetId);
      if (budget === undefined) throw budgetNotFound(budgetId);
      const live = await tx.envelopes.listLive(caller.tenant, budgetId, { pageSize: 1 });
      // An empty page with a token is a bounded read that found none yet, not the end: in use.
      const liveEnvelopes = live.items.length > 0 || live.nextPageToken !== null;
      const leased = await tx.leases.held(caller.tenant, budgetId, now);
      if (liveEnvelopes || leased)
        throw new SvcError(
          'SVC-BUD-3006',
          `budget ${budgetId} is in use: ${liveEnvelopes ? 'an envelope on it has not ended' : 'a proxy holds a lease of it'}`,
          { budget_id: budgetId, live_envelopes: liveEnvelopes, leased },
        );
      await tx.budgets.remove(caller.tenant, budgetId);
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'budget.delete',
        resource: { type: 'budget', id: budgetId },
        result: 'deleted',
        metadata: { name: budget.name, limits: budget.limits },
      });
      const message: BudgetDeletedMessage = {
        tenant_id: caller.tenant,
        budget_id: budgetId,
        budget_name: budget.name,
        occurred_at: now,
      };
      effects.publications.push({
        subject: subjects.budgetDeleted(caller.tenant),
        data: message,
        msgId: msgIds.budgetDeleted(caller.tenant, budgetId),
      });
      effects.changes.push({ kind: 'budget', tenant: caller.tenant, budgetId });
    });
  }

  /** The budget as of now (usage rolled into the current period), or SVC-BUD-3002. */
  async get(tenant: string, budgetId: string, from: Readers = this.deps.storage.read): Promise<Budget> {
    const budget = await this.find(tenant, budgetId, from);
    if (budget === undefined) throw budgetNotFound(budgetId);
    return budget;
  }

  async find(tenant: string, budgetId: string, from: Readers = this.deps.storage.read): Promise<Budget | undefined> {
    const stored = await from.budgets.get(tenant, budgetId);
    return stored === undefined ? undefined : rollOver(stored, this.deps.clock());
  }

  /** `warning` selects the active budgets past an alert threshold (which REST reports as active). */
  async list(tenant: string, status: BudgetStatus | 'warning' | 'all'): Promise<Budget[]> {
    const now = this.deps.clock();
    const stored = await collectPages((page) => this.deps.storage.read.budgets.list(tenant, page));
    return stored
      .map((b) => rollOver(b, now))
      .filter(
        (b) =>
          status === 'all' ||
          (status === 'warning' ? budgetStatusWithWarning(b, now) : budgetStatus(b, now)) === status,
      );
  }

  /** Current-period spend of every budget of these tenants, for the budget usage gauge. */
  async spendByBudget(tenants: Iterable<string>): Promise<BudgetSpend[]> {
    const out: BudgetSpend[] = [];
    for (const tenant of tenants) {
      for (const budget of await this.list(tenant, 'all'))
        out.push({
          tenant_id: tenant,
          budget_id: budget.budget_id,
          usd: microsToUsd(budget.usage.cost_micros),
          limit_usd: budget.limits.max_cost_usd,
        });
    }
    return out;
  }

  async check(
    tenant: string,
    budgetId: string,
    estimate: { estimated_tokens: number; estimated_cost_usd: number },
  ): Promise<CheckOutcome> {
    return checkBudget(
      await this.get(tenant, budgetId),
      { tokens: estimate.estimated_tokens, cost_micros: usdToMicros(estimate.estimated_cost_usd) },
      this.deps.clock(),
    );
  }

  /**
   * Inside the envelope-creation transaction: count one more execution in the current period, or
   * refuse an expired, exhausted or full budget with a BudgetError (the transaction then rolls the
   * count back with everything else). `known` is the budget as the caller read it before the
   * transaction: the period it gives is the one a read now would give (a period's bounds follow
   * from the budget's fixed `period` and `created_at`, and stored usage only moves forward), so it
   * is not read once more for that.
   */
  async reserveExecution(tx: Repositories, tenant: string, budgetId: string, known?: Budget): Promise<Budget> {
    const now = this.deps.clock();
    const stored = known ?? (await tx.budgets.get(tenant, budgetId));
    const outcome =
      stored === undefined
        ? undefined
        : await tx.budgets.reserveExecution(tenant, budgetId, currentPeriod(stored, now), now.toISOString());
    if (outcome === undefined) {
      throw new SvcError(
        'SVC-BUD-3005',
        `budget ${budgetId} is not a budget of this tenant`,
        { budget_id: budgetId, current_usage: 0, current: 0, limit: 0 },
        [{ field: 'budget_id', description: 'no such budget in this tenant' }],
      );
    }
    const { budget, reserved } = outcome;
    const status = budgetStatus(budget, now);
    if (status === 'expired')
      throw budgetError('SVC-BUD-3003', budget, `budget ${budgetId} expired at ${budget.expires_at}`);
    if (status === 'exhausted')
      throw budgetError('SVC-BUD-3001', budget, `budget ${budgetId} is exhausted for the current period`);
    if (!reserved) {
      throw budgetError(
        'SVC-BUD-3004',
        budget,
        `budget ${budgetId} allows ${budget.limits.max_executions} executions per period`,
      );
    }
    return budget;
  }

  /** Stores a new budget in the caller's transaction. */
  insert(tx: Repositories, tenant: string, budget: Budget): Promise<void> {
    return tx.budgets.insert(tenant, budget);
  }
}
