import { randomUUID } from 'node:crypto';
import { SvcError } from '../../core/errors/index.ts';
import { budgetStatus, remaining, rollOver, type Budget } from '../../core/domain/index.ts';
import type { LeaseGrant, LeaseRequest } from '../../core/sync/contract.ts';
import type { LeaseRecord } from '../storage/records.ts';
import type { Readers, Repositories, Storage } from '../storage/storage.ts';

/**
 * Budget leases (ARCHITECTURE §6): each proxy holds a slice of a budget's remainder and spends
 * from it without asking. All live leases together never exceed what the budget has left, so N
 * proxies cannot overspend beyond what is in flight between a proxy's settlement and the event
 * reaching the control plane. A lease not renewed within its time to live stops counting, so the
 * slice of a vanished proxy returns to the budget by itself.
 *
 * Spend a proxy reports in a renewal leaves its lease at once but reaches the budget's usage only
 * with its events; until the event processor applied it, the storage keeps it as reported and not
 * applied (`pendingSpend`), and it is not leased out again meanwhile.
 *
 * A holder numbers its reports; one sent again because its answer was lost (the replica died
 * after committing, the answer came too late) carries the number already counted, and adds
 * nothing. The number is kept in storage with the spend, so it holds across replicas.
 */
export class LeaseLedger {
  private readonly storage: Storage;
  private readonly clock: () => Date;
  private readonly ttlMs: number;

  constructor(storage: Storage, clock: () => Date, ttlMs: number) {
    this.storage = storage;
    this.clock = clock;
    this.ttlMs = ttlMs;
  }

  /** What the budget has neither spent nor leased out (nor had reported spent); null when unlimited. */
  async unleased(
    tenant: string,
    budget: Budget,
    from: Readers = this.storage.read,
  ): Promise<{ tokens: number | null; micros: number | null }> {
    const left = remaining(budget);
    const out = await from.leases.outstanding(tenant, budget.budget_id, this.clock().toISOString());
    const pending = await from.leases.pendingSpend(tenant, budget.budget_id, budget.usage.period_start);
    return {
      tokens: left.tokens === null ? null : Math.max(0, left.tokens - out.tokens - pending.tokens),
      micros: left.cost_micros === null ? null : Math.max(0, left.cost_micros - out.micros - pending.micros),
    };
  }

  /**
   * Grants, renews or returns a lease in the caller's transaction. The budget is held for the
   * transaction, so grants on one budget from several replicas are made one after the other.
   */
  async handle(tx: Repositories, tenant: string, request: LeaseRequest): Promise<LeaseGrant> {
    const stored = await tx.budgets.getForUpdate(tenant, request.budget_id);
    if (stored === undefined)
      throw new SvcError('SVC-BUD-3002', `budget ${request.budget_id} not found`, { budget_id: request.budget_id });
    const now = this.clock();
    const budget = rollOver(stored, now);
    const budgetId = budget.budget_id;
    // Only the holder's own lease is renewed, replaced or returned: another holder that learnt
    // its id could otherwise return it and have its slice leased again while it is spent.
    const found = request.lease_id === null ? undefined : await tx.leases.get(tenant, budgetId, request.lease_id);
    const existing = found?.holder === request.holder ? found : undefined;
    const held = existing !== undefined && Date.parse(existing.expires_at) > now.getTime() ? existing : undefined;
    const leaseId = held?.lease_id ?? randomUUID();
    const status = budgetStatus(budget, now);

    // A report sent again after its answer was lost was counted then: it adds nothing now, and
    // the lease it was answered with is renewed as it stands, not topped up a second time.
    const repeated = !(await counts(tx, tenant, budgetId, request, now));
    const spent = repeated ? { tokens: 0, micros: 0 } : { tokens: request.spent_tokens, micros: request.spent_micros };
    const want =
      repeated && held !== undefined
        ? { tokens: 0, micros: 0 }
        : { tokens: request.want_tokens, micros: request.want_micros };
    // The reported spend leaves the lease now but reaches the usage only with its events: hold it back meanwhile.
    if (spent.tokens !== 0 || spent.micros !== 0)
      await tx.leases.addSpend(tenant, budgetId, budget.usage.period_start, 'reported', spent);
    const pending = await tx.leases.pendingSpend(tenant, budgetId, budget.usage.period_start);

    if (request.release || status !== 'active') {
      if (existing !== undefined) await tx.leases.remove(tenant, budgetId, existing.lease_id);
      return { lease_id: leaseId, budget_id: budgetId, tokens: 0, micros: 0, expires_at: now.toISOString(), status };
    }

    const selfTokens = Math.max(0, (held?.tokens ?? 0) - spent.tokens);
    const selfMicros = Math.max(0, (held?.micros ?? 0) - spent.micros);
    const others = await tx.leases.outstanding(tenant, budgetId, now.toISOString(), held?.lease_id ?? null);
    const left = remaining(budget);
    const grant = (limitLeft: number | null, self: number, other: number, want: number): number | null =>
      limitLeft === null ? null : self + Math.min(want, Math.max(0, limitLeft - other - self));
    const record: LeaseRecord = {
      lease_id: leaseId,
      holder: request.holder,
      budget_id: budgetId,
      tokens: grant(left.tokens, selfTokens, others.tokens + pending.tokens, want.tokens),
      micros: grant(left.cost_micros, selfMicros, others.micros + pending.micros, want.micros),
      expires_at: new Date(now.getTime() + this.ttlMs).toISOString(),
    };
    if (existing !== undefined && existing.lease_id !== leaseId)
      await tx.leases.remove(tenant, budgetId, existing.lease_id);
    await tx.leases.put(tenant, record);
    return {
      lease_id: leaseId,
      budget_id: budgetId,
      tokens: record.tokens,
      micros: record.micros,
      expires_at: record.expires_at,
      ttl_ms: this.ttlMs,
      status,
    };
  }
}

/** Whether the request's spend is to be counted: always, unless its report was counted before. */
function counts(
  tx: Repositories,
  tenant: string,
  budgetId: string,
  request: LeaseRequest,
  now: Date,
): Promise<boolean> {
  if (request.report_seq === null || (request.spent_tokens === 0 && request.spent_micros === 0))
    return Promise.resolve(true);
  return tx.leases.claimReport(tenant, budgetId, request.holder, request.report_seq, now.toISOString());
}
