import type { KeyValueStore, Messaging } from '../../core/bus/bus.ts';
import { budgetStatus, type Budget } from '../../core/domain/index.ts';
import {
  BUCKETS,
  keys,
  syncSubjects,
  type BudgetState,
  type RulesetSnapshot,
  type TerminateSignal,
} from '../../core/sync/contract.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { StateSync } from '../effects/dispatcher.ts';
import type { StateChange } from '../effects/effects.ts';
import type { LeaseLedger } from '../leases/lease-ledger.ts';
import type { Policies } from '../policies/policies.ts';
import type { Tenants } from '../tenants/tenants.ts';

export function budgetState(
  budget: Budget,
  unleased: { tokens: number | null; micros: number | null },
  now: Date,
): BudgetState {
  return {
    tenant_id: budget.tenant_id,
    budget_id: budget.budget_id,
    status: budgetStatus(budget, now),
    limits: budget.limits,
    period_start: budget.usage.period_start,
    period_end: budget.usage.period_end,
    used_tokens: budget.usage.tokens_input + budget.usage.tokens_output,
    used_micros: budget.usage.cost_micros,
    unleased_tokens: unleased.tokens,
    unleased_micros: unleased.micros,
    updated_at: now.toISOString(),
  };
}

/**
 * Keeps the key-value buckets the proxies watch current: each tenant's ruleset and each budget's
 * state, written after every committed change and in full at start. Terminations go out as signals.
 */
export class StatePublisher implements StateSync {
  private readonly deps: {
    messaging: Messaging;
    policies: Policies;
    budgets: Budgets;
    leases: LeaseLedger;
    tenants: Tenants;
    clock: () => Date;
  };
  private rulesets: KeyValueStore | null = null;
  private budgetBucket: KeyValueStore | null = null;

  constructor(deps: StatePublisher['deps']) {
    this.deps = deps;
  }

  async start(): Promise<void> {
    this.rulesets = await this.deps.messaging.keyValue.open(BUCKETS.rulesets);
    this.budgetBucket = await this.deps.messaging.keyValue.open(BUCKETS.budgets);
    const changes: StateChange[] = [];
    for (const tenant of ['system', ...this.deps.tenants.list().map((t) => t.tenant_id)]) {
      changes.push({ kind: 'ruleset', tenant });
      for (const budget of this.deps.budgets.list(tenant, 'all'))
        changes.push({ kind: 'budget', tenant, budgetId: budget.budget_id });
    }
    await this.push(changes);
  }

  async push(changes: readonly StateChange[]): Promise<void> {
    const seen = new Set<string>();
    for (const change of changes) {
      const key = change.kind === 'ruleset' ? keys.ruleset(change.tenant) : keys.budget(change.tenant, change.budgetId);
      if (seen.has(key)) continue;
      seen.add(key);
      if (change.kind === 'ruleset') await this.pushRuleset(change.tenant);
      else await this.pushBudget(change.tenant, change.budgetId);
    }
  }

  async signal(signal: TerminateSignal): Promise<void> {
    await this.deps.messaging.signals.publishSignal(syncSubjects.terminate(signal.tenant_id), signal);
  }

  private async pushRuleset(tenant: string): Promise<void> {
    if (this.rulesets === null) return;
    const snapshot: RulesetSnapshot = {
      tenant_id: tenant,
      version: this.deps.policies.version(tenant),
      policies: this.deps.policies.list(tenant),
      published_at: this.deps.clock().toISOString(),
    };
    await this.rulesets.put(keys.ruleset(tenant), snapshot);
  }

  private async pushBudget(tenant: string, budgetId: string): Promise<void> {
    if (this.budgetBucket === null) return;
    const budget = this.deps.budgets.find(tenant, budgetId);
    if (budget === undefined) return;
    await this.budgetBucket.put(
      keys.budget(tenant, budgetId),
      budgetState(budget, this.deps.leases.unleased(tenant, budget), this.deps.clock()),
    );
  }
}
