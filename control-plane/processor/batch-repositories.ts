import type { Budget, Envelope } from '../../core/domain/index.ts';
import type { Spend } from '../storage/records.ts';
import type { BudgetRepository, EnvelopeRepository, LeaseRepository, Repositories } from '../storage/storage.ts';

/** Repositories for one batch's transaction, and what they still have to write at its end. */
export interface BatchRepositories {
  tx: Repositories;
  /** Writes what was held back; call it last, before the transaction commits. */
  flush(): Promise<void>;
}

interface HeldSpend {
  tenant: string;
  budgetId: string;
  periodStart: string;
  spend: Spend;
}

const key = (tenant: string, id: string): string => `${tenant}\u0000${id}`;

/**
 * The transaction's repositories with fewer round trips for a batch of events (each one is a
 * statement on PostgreSQL): an envelope or budget read once is served again from memory until
 * the transaction writes it, and a write that returns it (a charge, a usage change) leaves it as
 * written. That is exact: a row this transaction wrote stays locked against others until it ends,
 * and one it only read may change under it anyway between two statements. The spend applied to
 * the lease ledger is summed per budget and period and written once at the end: nothing in the
 * batch reads it back, and any other ledger call writes the sums first.
 */
export function batchRepositories(tx: Repositories): BatchRepositories {
  const envelopes = new Map<string, Envelope | undefined>();
  const budgets = new Map<string, Budget | undefined>();
  const held: HeldSpend[] = [];

  const flush = async (): Promise<void> => {
    for (const entry of held.splice(0))
      await tx.leases.addSpend(entry.tenant, entry.budgetId, entry.periodStart, 'applied', entry.spend);
  };

  const envelopeRepository: EnvelopeRepository = {
    get: async (tenant, envelopeId) => {
      const k = key(tenant, envelopeId);
      if (envelopes.has(k)) return envelopes.get(k);
      const envelope = await tx.envelopes.get(tenant, envelopeId);
      envelopes.set(k, envelope);
      return envelope;
    },
    list: (tenant, filter, page) => tx.envelopes.list(tenant, filter, page),
    listLive: (tenant, budgetId, page) => tx.envelopes.listLive(tenant, budgetId, page),
    insert: async (tenant, envelope, options) => {
      envelopes.delete(key(tenant, envelope.envelope_id));
      return tx.envelopes.insert(tenant, envelope, options);
    },
    charge: async (tenant, envelopeId, delta, overflow, updatedAt) => {
      const k = key(tenant, envelopeId);
      envelopes.delete(k);
      const charged = await tx.envelopes.charge(tenant, envelopeId, delta, overflow, updatedAt);
      envelopes.set(k, charged);
      return charged;
    },
    transition: async (tenant, envelopeId, from, change) => {
      const k = key(tenant, envelopeId);
      envelopes.delete(k);
      const moved = await tx.envelopes.transition(tenant, envelopeId, from, change);
      // Not moved: its status moved meanwhile; the next read asks storage.
      if (moved !== undefined) envelopes.set(k, moved);
      return moved;
    },
  };

  const budgetRepository: BudgetRepository = {
    get: async (tenant, budgetId) => {
      const k = key(tenant, budgetId);
      if (budgets.has(k)) return budgets.get(k);
      const budget = await tx.budgets.get(tenant, budgetId);
      budgets.set(k, budget);
      return budget;
    },
    list: (tenant, page) => tx.budgets.list(tenant, page),
    insert: async (tenant, budget) => {
      budgets.delete(key(tenant, budget.budget_id));
      return tx.budgets.insert(tenant, budget);
    },
    getForUpdate: async (tenant, budgetId) => {
      const budget = await tx.budgets.getForUpdate(tenant, budgetId);
      budgets.set(key(tenant, budgetId), budget);
      return budget;
    },
    addUsage: async (tenant, budgetId, delta, period, overflow, updatedAt) => {
      const k = key(tenant, budgetId);
      budgets.delete(k);
      const budget = await tx.budgets.addUsage(tenant, budgetId, delta, period, overflow, updatedAt);
      budgets.set(k, budget);
      return budget;
    },
    reserveExecution: async (tenant, budgetId, period, updatedAt) => {
      const k = key(tenant, budgetId);
      budgets.delete(k);
      const reserved = await tx.budgets.reserveExecution(tenant, budgetId, period, updatedAt);
      budgets.set(k, reserved?.budget);
      return reserved;
    },
    markAlertsFired: async (tenant, budgetId, periodStart, percents) => {
      // The fired alerts are part of the budget as read: the next read asks storage.
      budgets.delete(key(tenant, budgetId));
      return tx.budgets.markAlertsFired(tenant, budgetId, periodStart, percents);
    },
  };

  const leaseRepository: LeaseRepository = {
    get: async (tenant, budgetId, leaseId) => {
      await flush();
      return tx.leases.get(tenant, budgetId, leaseId);
    },
    outstanding: async (tenant, budgetId, now, exceptLeaseId) => {
      await flush();
      return tx.leases.outstanding(tenant, budgetId, now, exceptLeaseId);
    },
    pendingSpend: async (tenant, budgetId, periodStart) => {
      await flush();
      return tx.leases.pendingSpend(tenant, budgetId, periodStart);
    },
    put: async (tenant, lease) => {
      await flush();
      return tx.leases.put(tenant, lease);
    },
    remove: async (tenant, budgetId, leaseId) => {
      await flush();
      return tx.leases.remove(tenant, budgetId, leaseId);
    },
    addSpend: async (tenant, budgetId, periodStart, side, spend) => {
      if (side !== 'applied') {
        await flush();
        return tx.leases.addSpend(tenant, budgetId, periodStart, side, spend);
      }
      // A budget's later entry of the same period adds to its last one; another period starts a
      // new one after it, so the ledger resets in the order the events did.
      const last = held.findLast((h) => h.tenant === tenant && h.budgetId === budgetId);
      if (last !== undefined && last.periodStart === periodStart) {
        last.spend = { tokens: last.spend.tokens + spend.tokens, micros: last.spend.micros + spend.micros };
      } else {
        held.push({ tenant, budgetId, periodStart, spend: { ...spend } });
      }
    },
  };

  return {
    tx: { ...tx, envelopes: envelopeRepository, budgets: budgetRepository, leases: leaseRepository },
    flush,
  };
}
