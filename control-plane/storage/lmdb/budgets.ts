import { addUsage, type Budget, type Overflow, type UsageDelta } from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { BudgetDefinition, BudgetRepository, Page, PageRequest, PeriodWindow } from '../storage.ts';
import { usageIn } from '../totals.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

export class LmdbBudgets implements Sync<BudgetRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, budgetId: string): Budget | undefined {
    return this.#kv.get<Budget>(this.#layout.tenant(tenant, 'budget'), budgetId);
  }

  list(tenant: string, request?: PageRequest): Page<Budget> {
    const { size, after } = pageStart(request);
    return pageOf(this.#kv.range<Budget>(this.#layout.tenant(tenant, 'budget'), { after }), size);
  }

  insert(tenant: string, budget: Budget): void {
    const space = this.#layout.tenant(tenant, 'budget');
    if (this.#kv.get(space, budget.budget_id) !== undefined)
      throw taken('budget_id', budget.budget_id, `budget ${budget.budget_id} already exists`);
    this.#kv.put(space, budget.budget_id, budget);
  }

  remove(tenant: string, budgetId: string): boolean {
    const space = this.#layout.tenant(tenant, 'budget');
    if (this.#kv.get(space, budgetId) === undefined) return false;
    this.#kv.remove(space, budgetId);
    return true;
  }

  redefine(tenant: string, budgetId: string, definition: BudgetDefinition, updatedAt: string): Budget | undefined {
    const space = this.#layout.tenant(tenant, 'budget');
    const budget = this.#kv.get<Budget>(space, budgetId);
    if (budget === undefined) return undefined;
    const redefined: Budget = { ...budget, ...definition, updated_at: updatedAt };
    this.#kv.put(space, budgetId, redefined);
    return redefined;
  }

  /** One writer at a time holds every record already. */
  getForUpdate(tenant: string, budgetId: string): Budget | undefined {
    return this.get(tenant, budgetId);
  }

  getManyForUpdate(tenant: string, budgetIds: readonly string[]): Budget[] {
    return [...new Set(budgetIds)].flatMap((id) => this.get(tenant, id) ?? []);
  }

  addUsage(
    tenant: string,
    budgetId: string,
    delta: UsageDelta,
    period: PeriodWindow,
    overflow: Overflow,
    updatedAt: string,
  ): Budget | undefined {
    const space = this.#layout.tenant(tenant, 'budget');
    const budget = this.#kv.get<Budget>(space, budgetId);
    if (budget === undefined) return undefined;
    const charged: Budget = {
      ...budget,
      usage: addUsage(usageIn(budget.usage, period), delta, overflow),
      updated_at: updatedAt,
    };
    this.#kv.put(space, budgetId, charged);
    return charged;
  }

  reserveExecution(
    tenant: string,
    budgetId: string,
    period: PeriodWindow,
    updatedAt: string,
  ): { reserved: boolean; budget: Budget } | undefined {
    const space = this.#layout.tenant(tenant, 'budget');
    const budget = this.#kv.get<Budget>(space, budgetId);
    if (budget === undefined) return undefined;
    const usage = usageIn(budget.usage, period);
    const max = budget.limits.max_executions;
    if (max !== null && usage.executions >= max) return { reserved: false, budget: { ...budget, usage } };
    const reserved: Budget = {
      ...budget,
      usage: { ...usage, executions: usage.executions + 1 },
      updated_at: updatedAt,
    };
    this.#kv.put(space, budgetId, reserved);
    return { reserved: true, budget: reserved };
  }

  markAlertsFired(tenant: string, budgetId: string, periodStart: string, percents: readonly number[]): number[] {
    const space = this.#layout.tenant(tenant, 'budget');
    const budget = this.#kv.get<Budget>(space, budgetId);
    if (budget === undefined || budget.usage.period_start !== periodStart) return [];
    const added = [...new Set(percents)].filter((p) => !budget.usage.alerts_fired.includes(p));
    if (added.length > 0) {
      this.#kv.put(space, budgetId, {
        ...budget,
        usage: { ...budget.usage, alerts_fired: [...budget.usage.alerts_fired, ...added] },
      });
    }
    return added;
  }
}
