import {
  addUsage,
  boundedSum,
  emptyCostTotals,
  emptyUsage,
  type Budget,
  type CostTotals,
  type Envelope,
  type PeriodUsage,
} from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import { addCost } from '../storage/totals.ts';
import type { Spend } from '../storage/records.ts';
import type {
  BudgetRepository,
  EnvelopeCharge,
  EnvelopeRepository,
  LeaseRepository,
  Repositories,
} from '../storage/storage.ts';
import { ByTenant } from './by-tenant.ts';

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

/** A row this transaction has changed (and so holds), with what it still has to add to it. */
interface Held<D> {
  tenant: string;
  id: string;
  pending: D | null;
  updatedAt: string;
}

/** Holds a row the transaction has read for update or written, with nothing yet to add to it. */
function hold<D>(held: ByTenant<Held<D>>, tenant: string, id: string, updatedAt: string): void {
  held.set(tenant, id, { tenant, id, pending: null, updatedAt });
}

/**
 * Reads rows for update (held by the transaction from then on) and keeps them as read: served
 * from memory, each charge of them summed there. They are read again from storage, so what is held
 * back for them is written first.
 */
async function readHeld<T extends { updated_at: string }, D>(
  tenant: string,
  named: readonly string[],
  kind: {
    write: (tenant: string, id: string) => Promise<void>;
    read: (ids: string[]) => Promise<T[]>;
    idOf: (row: T) => string;
    rows: ByTenant<T | undefined>;
    held: ByTenant<Held<D>>;
  },
): Promise<T[]> {
  const ids = [...new Set(named)];
  for (const id of ids) await kind.write(tenant, id);
  const found = await kind.read(ids);
  for (const id of ids) kind.rows.set(tenant, id, undefined);
  for (const row of found) {
    const id = kind.idOf(row);
    kind.rows.set(tenant, id, row);
    hold(kind.held, tenant, id, row.updated_at);
  }
  return found;
}

/**
 * The transaction's repositories with fewer round trips for a batch of events (each one is a
 * statement on PostgreSQL). An envelope or budget read once is served again from memory until the
 * transaction writes it; a write that returns it leaves it as written. Once the transaction holds
 * one against every other until it ends (read by `getManyForUpdate`, inserted, or changed), its
 * charges and usage of the same period are computed here as storage computes them (`addCost`,
 * `addUsage`, both saturating) and their sum is written once: before any other call that concerns
 * that row, and at the end, where the envelopes' sums go in one call per tenant. The spend
 * applied to the lease ledger is summed per budget and period and written once at the end too:
 * nothing in the batch reads it back, and any other ledger call writes it first. A row only read
 * may change under the transaction between two statements anyway.
 */
export function batchRepositories(tx: Repositories): BatchRepositories {
  const envelopes = new ByTenant<Envelope | undefined>();
  const budgets = new ByTenant<Budget | undefined>();
  const heldEnvelopes = new ByTenant<Held<CostTotals>>();
  const heldBudgets = new ByTenant<Held<PeriodUsage>>();
  const spends: HeldSpend[] = [];
  /** Envelopes the transaction inserts, not written yet: each as inserted, with its status changes. */
  const unwritten = new ByTenant<{ tenant: string; envelope: Envelope }>();

  /**
   * The envelopes inserted so far, in one call per tenant. Each was read as absent in this
   * transaction; one that another transaction stored since fails the batch, which the bus then
   * hands over again (its events then find the envelope).
   */
  const writeInserted = async (): Promise<void> => {
    const byTenant = new Map<string, Envelope[]>();
    for (const { tenant, envelope } of unwritten.values()) {
      const list = byTenant.get(tenant) ?? [];
      list.push(envelope);
      byTenant.set(tenant, list);
    }
    unwritten.clear();
    for (const [tenant, list] of byTenant) {
      const stored = await tx.envelopes.insertMany(tenant, list);
      if (stored.length < list.length) {
        throw new SvcError('SVC-EVT-4001', 'an envelope the batch opens was stored meanwhile by another writer', {
          tenant_id: tenant,
        });
      }
    }
  };
  const writeEnvelope = async (tenant: string, id: string): Promise<void> => {
    if (unwritten.has(tenant, id)) await writeInserted();
    const held = heldEnvelopes.get(tenant, id);
    if (held?.pending == null) return;
    const charged = await tx.envelopes.charge(held.tenant, held.id, held.pending, 'saturate', held.updatedAt);
    held.pending = null;
    envelopes.set(tenant, id, charged);
  };
  const writeBudget = async (tenant: string, id: string): Promise<void> => {
    const held = heldBudgets.get(tenant, id);
    if (held?.pending == null) return;
    const { period_start: start, period_end: end } = held.pending;
    const changed = await tx.budgets.addUsage(
      held.tenant,
      held.id,
      held.pending,
      { start, end },
      'saturate',
      held.updatedAt,
    );
    held.pending = null;
    budgets.set(tenant, id, changed);
  };
  const writeSpends = async (): Promise<void> => {
    for (const entry of spends.splice(0))
      await tx.leases.addSpend(entry.tenant, entry.budgetId, entry.periodStart, 'applied', entry.spend);
  };
  /** Every held envelope's sum, in one call per tenant; the rows kept in memory are as written. */
  const writeEnvelopes = async (): Promise<void> => {
    await writeInserted();
    const byTenant = new Map<string, EnvelopeCharge[]>();
    for (const held of heldEnvelopes.values()) {
      if (held.pending === null) continue;
      const charges = byTenant.get(held.tenant) ?? [];
      charges.push({ envelopeId: held.id, delta: held.pending, updatedAt: held.updatedAt });
      byTenant.set(held.tenant, charges);
      held.pending = null;
    }
    for (const [tenant, charges] of byTenant) await tx.envelopes.chargeMany(tenant, charges);
  };
  const flush = async (): Promise<void> => {
    // In the order every writer takes them: budgets before their envelopes.
    for (const { tenant, id } of heldBudgets.values()) await writeBudget(tenant, id);
    await writeEnvelopes();
    await writeSpends();
  };

  const envelopeRepository: EnvelopeRepository = {
    insertMany: async (tenant, list) => {
      for (const envelope of list) await writeEnvelope(tenant, envelope.envelope_id);
      for (const envelope of list) envelopes.delete(tenant, envelope.envelope_id);
      return tx.envelopes.insertMany(tenant, list);
    },
    get: async (tenant, envelopeId) => {
      if (envelopes.has(tenant, envelopeId)) return envelopes.get(tenant, envelopeId);
      const envelope = await tx.envelopes.get(tenant, envelopeId);
      envelopes.set(tenant, envelopeId, envelope);
      return envelope;
    },
    getMany: async (tenant, envelopeIds) => {
      const unread = envelopeIds.filter((id) => !envelopes.has(tenant, id));
      if (unread.length > 0) {
        for (const id of unread) envelopes.set(tenant, id, undefined);
        for (const envelope of await tx.envelopes.getMany(tenant, unread))
          envelopes.set(tenant, envelope.envelope_id, envelope);
      }
      return [...new Set(envelopeIds)].flatMap((id) => envelopes.get(tenant, id) ?? []);
    },
    getManyForUpdate: (tenant, envelopeIds) =>
      readHeld(tenant, envelopeIds, {
        write: writeEnvelope,
        read: (ids) => tx.envelopes.getManyForUpdate(tenant, ids),
        idOf: (envelope) => envelope.envelope_id,
        rows: envelopes,
        held: heldEnvelopes,
      }),
    list: async (tenant, filter, page) => {
      await writeEnvelopes();
      return tx.envelopes.list(tenant, filter, page);
    },
    listNewest: async (tenant, filter, page) => {
      await writeEnvelopes();
      return tx.envelopes.listNewest(tenant, filter, page);
    },
    listLive: async (tenant, budgetId, page) => {
      await writeEnvelopes();
      return tx.envelopes.listLive(tenant, budgetId, page);
    },
    insert: async (tenant, envelope, options) => {
      // Read as absent in this transaction: written with the other envelopes it inserts, later.
      if (
        options.executionTaken === 'keep' &&
        envelopes.has(tenant, envelope.envelope_id) &&
        envelopes.get(tenant, envelope.envelope_id) === undefined
      ) {
        envelopes.set(tenant, envelope.envelope_id, envelope);
        unwritten.set(tenant, envelope.envelope_id, { tenant, envelope });
        hold(heldEnvelopes, tenant, envelope.envelope_id, envelope.updated_at);
        return true;
      }
      await writeEnvelope(tenant, envelope.envelope_id);
      envelopes.delete(tenant, envelope.envelope_id);
      const inserted = await tx.envelopes.insert(tenant, envelope, options);
      // No other transaction sees the row before this one commits: it is held like one locked.
      if (inserted) {
        envelopes.set(tenant, envelope.envelope_id, envelope);
        hold(heldEnvelopes, tenant, envelope.envelope_id, envelope.updated_at);
      }
      return inserted;
    },
    changeStatus: async (tenant, envelopeId, from, change) =>
      (await envelopeRepository.transition(tenant, envelopeId, from, change)) !== undefined,
    chargeMany: async (tenant, charges) => {
      for (const { envelopeId } of charges) {
        await writeEnvelope(tenant, envelopeId);
        envelopes.delete(tenant, envelopeId);
      }
      await tx.envelopes.chargeMany(tenant, charges);
    },
    charge: async (tenant, envelopeId, delta, overflow, updatedAt) => {
      const held = heldEnvelopes.get(tenant, envelopeId);
      const current = envelopes.get(tenant, envelopeId);
      if (overflow === 'saturate' && held !== undefined && current !== undefined) {
        const charged: Envelope = { ...current, cost: addCost(current.cost, delta, 'saturate'), updated_at: updatedAt };
        held.pending = addCost(held.pending ?? emptyCostTotals(), delta, 'saturate');
        held.updatedAt = updatedAt;
        envelopes.set(tenant, envelopeId, charged);
        return charged;
      }
      await writeEnvelope(tenant, envelopeId);
      envelopes.delete(tenant, envelopeId);
      const charged = await tx.envelopes.charge(tenant, envelopeId, delta, overflow, updatedAt);
      envelopes.set(tenant, envelopeId, charged);
      if (charged !== undefined) hold(heldEnvelopes, tenant, envelopeId, updatedAt);
      return charged;
    },
    transition: async (tenant, envelopeId, from, change) => {
      const held = heldEnvelopes.get(tenant, envelopeId);
      const current = envelopes.get(tenant, envelopeId);
      const inserted = unwritten.get(tenant, envelopeId);
      if (inserted !== undefined && held !== undefined && current !== undefined) {
        // Not written yet: it is inserted with its status as it ends up.
        if (current.status !== from) return undefined;
        const next: Envelope = { ...current, ...change };
        inserted.envelope = { ...inserted.envelope, ...change };
        envelopes.set(tenant, envelopeId, next);
        held.updatedAt = next.updated_at;
        return next;
      }
      if (held?.pending != null && current !== undefined) {
        // A status change touches no total: the charges held back still add to the row at the end.
        if (!(await tx.envelopes.changeStatus(tenant, envelopeId, from, change))) {
          envelopes.delete(tenant, envelopeId);
          return undefined;
        }
        const next: Envelope = { ...current, ...change };
        envelopes.set(tenant, envelopeId, next);
        held.updatedAt = next.updated_at;
        return next;
      }
      await writeEnvelope(tenant, envelopeId);
      envelopes.delete(tenant, envelopeId);
      const moved = await tx.envelopes.transition(tenant, envelopeId, from, change);
      // Not moved: its status moved meanwhile; the next read asks storage.
      if (moved !== undefined) {
        envelopes.set(tenant, envelopeId, moved);
        hold(heldEnvelopes, tenant, envelopeId, moved.updated_at);
      }
      return moved;
    },
  };

  const budgetRepository: BudgetRepository = {
    get: async (tenant, budgetId) => {
      if (budgets.has(tenant, budgetId)) return budgets.get(tenant, budgetId);
      const budget = await tx.budgets.get(tenant, budgetId);
      budgets.set(tenant, budgetId, budget);
      return budget;
    },
    list: async (tenant, page) => {
      await flush();
      return tx.budgets.list(tenant, page);
    },
    insert: async (tenant, budget) => {
      budgets.delete(tenant, budget.budget_id);
      return tx.budgets.insert(tenant, budget);
    },
    getManyForUpdate: (tenant, budgetIds) =>
      readHeld(tenant, budgetIds, {
        write: writeBudget,
        read: (ids) => tx.budgets.getManyForUpdate(tenant, ids),
        idOf: (budget) => budget.budget_id,
        rows: budgets,
        held: heldBudgets,
      }),
    getForUpdate: async (tenant, budgetId) => {
      await writeBudget(tenant, budgetId);
      const budget = await tx.budgets.getForUpdate(tenant, budgetId);
      budgets.set(tenant, budgetId, budget);
      return budget;
    },
    addUsage: async (tenant, budgetId, delta, period, overflow, updatedAt) => {
      const held = heldBudgets.get(tenant, budgetId);
      const current = budgets.get(tenant, budgetId);
      if (
        overflow === 'saturate' &&
        held !== undefined &&
        current !== undefined &&
        current.usage.period_start === period.start
      ) {
        const changed: Budget = {
          ...current,
          usage: addUsage(current.usage, delta, 'saturate'),
          updated_at: updatedAt,
        };
        held.pending = addUsage(held.pending ?? emptyUsage(period.start, period.end), delta, 'saturate');
        held.updatedAt = updatedAt;
        budgets.set(tenant, budgetId, changed);
        return changed;
      }
      await writeBudget(tenant, budgetId);
      budgets.delete(tenant, budgetId);
      const changed = await tx.budgets.addUsage(tenant, budgetId, delta, period, overflow, updatedAt);
      budgets.set(tenant, budgetId, changed);
      if (changed !== undefined) hold(heldBudgets, tenant, budgetId, updatedAt);
      return changed;
    },
    reserveExecution: async (tenant, budgetId, period, updatedAt) => {
      await writeBudget(tenant, budgetId);
      budgets.delete(tenant, budgetId);
      heldBudgets.delete(tenant, budgetId);
      const reserved = await tx.budgets.reserveExecution(tenant, budgetId, period, updatedAt);
      budgets.set(tenant, budgetId, reserved?.budget);
      return reserved;
    },
    markAlertsFired: async (tenant, budgetId, periodStart, percents) => {
      await writeBudget(tenant, budgetId);
      // The fired alerts are part of the budget as read: the next read asks storage.
      budgets.delete(tenant, budgetId);
      heldBudgets.delete(tenant, budgetId);
      return tx.budgets.markAlertsFired(tenant, budgetId, periodStart, percents);
    },
    remove: async (tenant, budgetId) => {
      await writeBudget(tenant, budgetId);
      budgets.delete(tenant, budgetId);
      heldBudgets.delete(tenant, budgetId);
      return tx.budgets.remove(tenant, budgetId);
    },
    redefine: async (tenant, budgetId, definition, updatedAt) => {
      await writeBudget(tenant, budgetId);
      budgets.delete(tenant, budgetId);
      heldBudgets.delete(tenant, budgetId);
      return tx.budgets.redefine(tenant, budgetId, definition, updatedAt);
    },
  };

  const leaseRepository: LeaseRepository = {
    get: async (tenant, budgetId, leaseId) => {
      await writeSpends();
      return tx.leases.get(tenant, budgetId, leaseId);
    },
    outstanding: async (tenant, budgetId, now, exceptLeaseId) => {
      await writeSpends();
      return tx.leases.outstanding(tenant, budgetId, now, exceptLeaseId);
    },
    held: (tenant, budgetId, now) => tx.leases.held(tenant, budgetId, now),
    pendingSpend: async (tenant, budgetId, periodStart) => {
      await writeSpends();
      return tx.leases.pendingSpend(tenant, budgetId, periodStart);
    },
    put: async (tenant, lease) => {
      await writeSpends();
      return tx.leases.put(tenant, lease);
    },
    remove: async (tenant, budgetId, leaseId) => {
      await writeSpends();
      return tx.leases.remove(tenant, budgetId, leaseId);
    },
    claimReport: async (tenant, budgetId, holder, seq, at) => {
      await writeSpends();
      return tx.leases.claimReport(tenant, budgetId, holder, seq, at);
    },
    reports: (tenant, budgetId) => tx.leases.reports(tenant, budgetId),
    removeExpiredBefore: (tenant, before, after, limit) => tx.leases.removeExpiredBefore(tenant, before, after, limit),
    removeReportsBefore: (tenant, before, after, limit) => tx.leases.removeReportsBefore(tenant, before, after, limit),
    addSpend: async (tenant, budgetId, periodStart, side, spend) => {
      if (side !== 'applied') {
        await writeSpends();
        return tx.leases.addSpend(tenant, budgetId, periodStart, side, spend);
      }
      // A budget's later entry of the same period adds to its last one; another period starts a
      // new one after it, so the ledger resets in the order the events did.
      const last = spends.findLast((h) => h.tenant === tenant && h.budgetId === budgetId);
      if (last !== undefined && last.periodStart === periodStart) {
        // Held at the maximum as storage holds the ledger's totals: an unbounded sum would be one
        // the backend cannot take, failing every later batch that applies spend to the budget.
        last.spend = {
          tokens: boundedSum(last.spend.tokens, spend.tokens, 'lease spend', 'saturate'),
          micros: boundedSum(last.spend.micros, spend.micros, 'lease spend', 'saturate'),
        };
      } else {
        spends.push({ tenant, budgetId, periodStart, spend: { ...spend } });
      }
    },
  };

  return {
    tx: { ...tx, envelopes: envelopeRepository, budgets: budgetRepository, leases: leaseRepository },
    flush,
  };
}
