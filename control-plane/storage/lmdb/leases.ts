import { boundedSum } from '../../../core/domain/index.ts';
import type { LeaseRecord, LeaseReport, Spend } from '../records.ts';
import type { LeaseRepository, RemovedSlice } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import type { Sync } from './promised.ts';

/** Reported and applied spend of one budget's period. */
interface LeaseSpend {
  period_start: string;
  reported_tokens: number;
  reported_micros: number;
  applied_tokens: number;
  applied_micros: number;
}

/** The last report of a holder's counted on a budget (`counted_at` since schema version 3). */
export type ReportMark = Omit<LeaseReport, 'holder'>;

const SPEND = 'spend/';

/** Spend was spent and cannot be refused: a total at its maximum stays there (see `Overflow`). */
const saturated = (total: number, added: number): number => boundedSum(total, added, 'lease spend', 'saturate');
/** The key prefix of report numbers in a tenant's lease table. */
export const REPORT = 'report/';

/**
 * Leases under `[tenant, 'lease', '<budget>/<lease>']`; the budget's reported and applied spend
 * beside them under `spend/<budget>`, and each holder's last counted report under
 * `report/<budget>/<holder>`, keys their `<budget>/` range never matches (budget ids are UUIDs).
 */
export class LmdbLeases implements Sync<LeaseRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, budgetId: string, leaseId: string): LeaseRecord | undefined {
    return this.#kv.get<LeaseRecord>(this.#layout.tenant(tenant, 'lease'), `${budgetId}/${leaseId}`);
  }

  held(tenant: string, budgetId: string, now: string): boolean {
    const at = Date.parse(now);
    for (const { value: lease } of this.#kv.range<LeaseRecord>(this.#layout.tenant(tenant, 'lease'), {
      prefix: `${budgetId}/`,
    })) {
      if (Date.parse(lease.expires_at) > at) return true;
    }
    return false;
  }

  outstanding(tenant: string, budgetId: string, now: string, exceptLeaseId: string | null = null): Spend {
    const at = Date.parse(now);
    const sum = { tokens: 0, micros: 0 };
    for (const { value: lease } of this.#kv.range<LeaseRecord>(this.#layout.tenant(tenant, 'lease'), {
      prefix: `${budgetId}/`,
    })) {
      if (lease.lease_id === exceptLeaseId || Date.parse(lease.expires_at) <= at) continue;
      sum.tokens += lease.tokens ?? 0;
      sum.micros += lease.micros ?? 0;
    }
    return sum;
  }

  pendingSpend(tenant: string, budgetId: string, periodStart: string): Spend {
    const record = this.#spend(tenant, budgetId, periodStart);
    return {
      tokens: Math.max(0, record.reported_tokens - record.applied_tokens),
      micros: Math.max(0, record.reported_micros - record.applied_micros),
    };
  }

  put(tenant: string, lease: LeaseRecord): void {
    this.#kv.put(this.#layout.tenant(tenant, 'lease'), `${lease.budget_id}/${lease.lease_id}`, lease);
  }

  remove(tenant: string, budgetId: string, leaseId: string): void {
    this.#kv.remove(this.#layout.tenant(tenant, 'lease'), `${budgetId}/${leaseId}`);
  }

  addSpend(tenant: string, budgetId: string, periodStart: string, side: 'reported' | 'applied', spend: Spend): void {
    const record = this.#spend(tenant, budgetId, periodStart);
    const next: LeaseSpend =
      side === 'reported'
        ? {
            ...record,
            reported_tokens: saturated(record.reported_tokens, spend.tokens),
            reported_micros: saturated(record.reported_micros, spend.micros),
          }
        : {
            ...record,
            applied_tokens: saturated(record.applied_tokens, spend.tokens),
            applied_micros: saturated(record.applied_micros, spend.micros),
          };
    this.#kv.put(this.#layout.tenant(tenant, 'lease'), `${SPEND}${budgetId}`, next);
  }

  claimReport(tenant: string, budgetId: string, holder: string, seq: number, at: string): boolean {
    const table = this.#layout.tenant(tenant, 'lease');
    const key = `${REPORT}${budgetId}/${holder}`;
    const mark = this.#kv.get<ReportMark>(table, key);
    if (mark !== undefined && mark.seq >= seq) return false;
    this.#kv.put(table, key, { seq, counted_at: at } satisfies ReportMark);
    return true;
  }

  reports(tenant: string, budgetId: string): LeaseReport[] {
    const prefix = `${REPORT}${budgetId}/`;
    return [...this.#kv.range<ReportMark>(this.#layout.tenant(tenant, 'lease'), { prefix })].map(({ id, value }) => ({
      holder: String(id).slice(prefix.length),
      seq: value.seq,
      counted_at: value.counted_at,
    }));
  }

  removeExpiredBefore(tenant: string, before: string, after: string | null, limit: number): RemovedSlice {
    const at = Date.parse(before);
    return this.#removeWhere(tenant, after, limit, (id, value) => {
      if (id.startsWith(SPEND) || id.startsWith(REPORT)) return false;
      return Date.parse((value as LeaseRecord).expires_at) < at;
    });
  }

  removeReportsBefore(tenant: string, before: string, after: string | null, limit: number): RemovedSlice {
    const at = Date.parse(before);
    return this.#removeWhere(
      tenant,
      after,
      limit,
      (id, value) => id.startsWith(REPORT) && Date.parse((value as ReportMark).counted_at) < at,
      REPORT,
    );
  }

  /**
   * Of the `limit` records of the tenant's lease table after key `after`, removes those `doomed`
   * picks. LMDB has no index by expiry here: a walk of every lease in one transaction would hold
   * the writer for as long as the tenant has leases.
   */
  #removeWhere(
    tenant: string,
    after: string | null,
    limit: number,
    doomed: (id: string, value: unknown) => boolean,
    prefix?: string,
  ): RemovedSlice {
    const space = this.#layout.tenant(tenant, 'lease');
    const ids: string[] = [];
    let looked = 0;
    let last: string | null = null;
    for (const { id, value } of this.#kv.range<unknown>(space, { prefix, after: after ?? undefined })) {
      if (looked >= limit) break;
      looked++;
      last = String(id);
      if (doomed(last, value)) ids.push(last);
    }
    // Removed after the walk: the range reads the staged view, which these removals change.
    for (const id of ids) this.#kv.remove(space, id);
    return { removed: ids.length, next: looked < limit ? null : last };
  }

  /** The period's spend record; a fresh one when the stored record is of another period. */
  #spend(tenant: string, budgetId: string, periodStart: string): LeaseSpend {
    const record = this.#kv.get<LeaseSpend>(this.#layout.tenant(tenant, 'lease'), `${SPEND}${budgetId}`);
    if (record !== undefined && record.period_start === periodStart) return record;
    return { period_start: periodStart, reported_tokens: 0, reported_micros: 0, applied_tokens: 0, applied_micros: 0 };
  }
}
