import type { Budget } from '../../core/domain/index.ts';
import type { Store } from '../store/store.ts';

/**
 * Spend that proxies reported in lease renewals and that the event processor has not applied to
 * the budget yet. A renewal takes the reported amount out of the proxy's lease at once, while the
 * usage events carrying the same spend reach the budget a little later (or, when a proxy renews
 * late, earlier); without this the amount could be in neither for a moment and be leased out
 * twice (ARCHITECTURE §6).
 *
 * Both sides are kept as period totals: what proxies reported, and what the processor applied
 * from proxy events (`source` `proxy:…`). Reported beyond applied is still on its way.
 */
interface LeaseSpend {
  period_start: string;
  reported_tokens: number;
  reported_micros: number;
  applied_tokens: number;
  applied_micros: number;
}

export interface Spend {
  tokens: number;
  micros: number;
}

/** Kept beside the budget's leases, under a key their `<budget>/` listing never matches. */
const id = (budgetId: string) => `spend/${budgetId}`;

function current(store: Store, tenant: string, budget: Budget): LeaseSpend {
  const record = store.get<LeaseSpend>(tenant, 'lease', id(budget.budget_id));
  if (record !== undefined && record.period_start === budget.usage.period_start) return record;
  return {
    period_start: budget.usage.period_start,
    reported_tokens: 0,
    reported_micros: 0,
    applied_tokens: 0,
    applied_micros: 0,
  };
}

/** A lease request reported `spent` out of a lease (inside the ledger's transaction). */
export function recordReported(store: Store, tenant: string, budget: Budget, spent: Spend): void {
  if (spent.tokens === 0 && spent.micros === 0) return;
  const record = current(store, tenant, budget);
  store.put(tenant, 'lease', id(budget.budget_id), {
    ...record,
    reported_tokens: record.reported_tokens + spent.tokens,
    reported_micros: record.reported_micros + spent.micros,
  });
}

/** The processor applied a proxy's usage event to `budget` (already rolled into its current period). */
export function recordApplied(store: Store, tenant: string, budget: Budget, applied: Spend): void {
  const record = current(store, tenant, budget);
  store.put(tenant, 'lease', id(budget.budget_id), {
    ...record,
    applied_tokens: record.applied_tokens + applied.tokens,
    applied_micros: record.applied_micros + applied.micros,
  });
}

/** Reported and not applied yet: neither in a lease nor in the usage, so not to be leased again. */
export function pendingSpend(store: Store, tenant: string, budget: Budget): Spend {
  const record = current(store, tenant, budget);
  return {
    tokens: Math.max(0, record.reported_tokens - record.applied_tokens),
    micros: Math.max(0, record.reported_micros - record.applied_micros),
  };
}
