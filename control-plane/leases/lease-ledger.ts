import { randomUUID } from 'node:crypto';
import { SvcError } from '../../core/errors/index.ts';
import { budgetStatus, remaining, type Budget } from '../../core/domain/index.ts';
import type { LeaseGrant, LeaseRequest } from '../../core/sync/contract.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { Store } from '../store/store.ts';
import { pendingSpend, recordReported } from './unapplied-spend.ts';

interface LeaseRecord {
  lease_id: string;
  holder: string;
  budget_id: string;
  /** Granted and not yet reported spent; null when that dimension is unlimited. */
  tokens: number | null;
  micros: number | null;
  expires_at: string;
}

export interface Outstanding {
  tokens: number;
  micros: number;
}

/**
 * Budget leases (ARCHITECTURE §6): each proxy holds a slice of a budget's remainder and spends
 * from it without asking. All live leases together never exceed what the budget has left, so N
 * proxies cannot overspend beyond what is in flight between a proxy's settlement and the event
 * reaching the control plane. A lease not renewed within its time to live stops counting, so the
 * slice of a vanished proxy returns to the budget by itself.
 */
export class LeaseLedger {
  private readonly store: Store;
  private readonly budgets: Budgets;
  private readonly clock: () => Date;
  private readonly ttlMs: number;

  constructor(store: Store, budgets: Budgets, clock: () => Date, ttlMs: number) {
    this.store = store;
    this.budgets = budgets;
    this.clock = clock;
    this.ttlMs = ttlMs;
  }

  /** The sum of the budget's live leases, leaving out `except`. */
  outstanding(tenant: string, budgetId: string, except: string | null = null): Outstanding {
    const now = this.clock().getTime();
    const sum = { tokens: 0, micros: 0 };
    for (const lease of this.store.list<LeaseRecord>(tenant, 'lease', { prefix: `${budgetId}/` })) {
      if (lease.lease_id === except || Date.parse(lease.expires_at) <= now) continue;
      sum.tokens += lease.tokens ?? 0;
      sum.micros += lease.micros ?? 0;
    }
    return sum;
  }

  /** What the budget has neither spent nor leased out (nor had reported spent); null when unlimited. */
  unleased(tenant: string, budget: Budget): { tokens: number | null; micros: number | null } {
    const left = remaining(budget);
    const out = this.outstanding(tenant, budget.budget_id);
    const pending = pendingSpend(this.store, tenant, budget);
    return {
      tokens: left.tokens === null ? null : Math.max(0, left.tokens - out.tokens - pending.tokens),
      micros: left.cost_micros === null ? null : Math.max(0, left.cost_micros - out.micros - pending.micros),
    };
  }

  /** Grants, renews or returns a lease; runs inside a store transaction. */
  handle(tenant: string, request: LeaseRequest): LeaseGrant {
    const budget = this.budgets.find(tenant, request.budget_id);
    if (budget === undefined)
      throw new SvcError('SVC-BUD-3002', `budget ${request.budget_id} not found`, { budget_id: request.budget_id });
    const now = this.clock();
    const id = (leaseId: string) => `${budget.budget_id}/${leaseId}`;
    const existing =
      request.lease_id === null ? undefined : this.store.get<LeaseRecord>(tenant, 'lease', id(request.lease_id));
    const held =
      existing !== undefined && existing.holder === request.holder && Date.parse(existing.expires_at) > now.getTime()
        ? existing
        : undefined;
    const leaseId = held?.lease_id ?? randomUUID();
    const status = budgetStatus(budget, now);

    // The reported spend leaves the lease now but reaches the usage only with its events: hold it back meanwhile.
    recordReported(this.store, tenant, budget, { tokens: request.spent_tokens, micros: request.spent_micros });
    const pending = pendingSpend(this.store, tenant, budget);

    if (request.release || status !== 'active') {
      if (existing !== undefined) this.store.remove(tenant, 'lease', id(existing.lease_id));
      return {
        lease_id: leaseId,
        budget_id: budget.budget_id,
        tokens: 0,
        micros: 0,
        expires_at: now.toISOString(),
        status,
      };
    }

    const selfTokens = Math.max(0, (held?.tokens ?? 0) - request.spent_tokens);
    const selfMicros = Math.max(0, (held?.micros ?? 0) - request.spent_micros);
    const others = this.outstanding(tenant, budget.budget_id, held?.lease_id ?? null);
    const left = remaining(budget);
    const grant = (limitLeft: number | null, self: number, other: number, want: number): number | null =>
      limitLeft === null ? null : self + Math.min(want, Math.max(0, limitLeft - other - self));
    const record: LeaseRecord = {
      lease_id: leaseId,
      holder: request.holder,
      budget_id: budget.budget_id,
      tokens: grant(left.tokens, selfTokens, others.tokens + pending.tokens, request.want_tokens),
      micros: grant(left.cost_micros, selfMicros, others.micros + pending.micros, request.want_micros),
      expires_at: new Date(now.getTime() + this.ttlMs).toISOString(),
    };
    if (existing !== undefined && existing.lease_id !== leaseId)
      this.store.remove(tenant, 'lease', id(existing.lease_id));
    this.store.put(tenant, 'lease', id(leaseId), record);
    return {
      lease_id: leaseId,
      budget_id: budget.budget_id,
      tokens: record.tokens,
      micros: record.micros,
      expires_at: record.expires_at,
      status,
    };
  }
}
