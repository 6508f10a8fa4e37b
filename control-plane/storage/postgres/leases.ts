import { MAX_TOTAL } from '../../../core/domain/index.ts';
import type { LeaseRecord, LeaseReport, Spend } from '../records.ts';
import type { LeaseRepository, RemovedSlice } from '../storage.ts';
import { int, type Sql } from './sql.ts';

/**
 * Leases per budget; the spend reported and applied in the budget's period in `lease_spend`, the
 * last report counted per holder in `lease_reports`.
 */
export class PgLeases implements LeaseRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, budgetId: string, leaseId: string): Promise<LeaseRecord | undefined> {
    const { rows } = await this.#sql.query<{ doc: LeaseRecord }>(
      'SELECT doc FROM leases WHERE tenant_id = $1 AND budget_id = $2 AND lease_id = $3',
      [tenant, budgetId, leaseId],
    );
    return rows[0]?.doc;
  }

  async held(tenant: string, budgetId: string, now: string): Promise<boolean> {
    const { rows } = await this.#sql.query(
      `SELECT 1 FROM leases WHERE tenant_id = $1 AND budget_id = $2 AND expires_at > $3::text::timestamptz LIMIT 1`,
      [tenant, budgetId, now],
    );
    return rows.length > 0;
  }

  async outstanding(
    tenant: string,
    budgetId: string,
    now: string,
    exceptLeaseId: string | null = null,
  ): Promise<Spend> {
    const { rows } = await this.#sql.query<{ tokens: string; micros: string }>(
      `SELECT coalesce(sum(tokens), 0) AS tokens, coalesce(sum(micros), 0) AS micros FROM leases
       WHERE tenant_id = $1 AND budget_id = $2 AND expires_at > $3::text::timestamptz
         AND ($4::text IS NULL OR lease_id <> $4)`,
      [tenant, budgetId, now, exceptLeaseId],
    );
    return { tokens: int(rows[0]!.tokens), micros: int(rows[0]!.micros) };
  }

  async pendingSpend(tenant: string, budgetId: string, periodStart: string): Promise<Spend> {
    const { rows } = await this.#sql.query<{ tokens: string; micros: string }>(
      `SELECT greatest(0, reported_tokens - applied_tokens) AS tokens, greatest(0, reported_micros - applied_micros) AS micros
       FROM lease_spend WHERE tenant_id = $1 AND budget_id = $2 AND period_start = $3`,
      [tenant, budgetId, periodStart],
    );
    return rows[0] === undefined
      ? { tokens: 0, micros: 0 }
      : { tokens: int(rows[0].tokens), micros: int(rows[0].micros) };
  }

  async put(tenant: string, lease: LeaseRecord): Promise<void> {
    await this.#sql.query(
      `INSERT INTO leases (tenant_id, budget_id, lease_id, expires_at, tokens, micros, doc)
       VALUES ($1, $2, $3, $4::text::timestamptz, $5, $6, $7)
       ON CONFLICT (tenant_id, budget_id, lease_id) DO UPDATE SET
         expires_at = excluded.expires_at, tokens = excluded.tokens, micros = excluded.micros, doc = excluded.doc`,
      [tenant, lease.budget_id, lease.lease_id, lease.expires_at, lease.tokens, lease.micros, JSON.stringify(lease)],
    );
  }

  async remove(tenant: string, budgetId: string, leaseId: string): Promise<void> {
    await this.#sql.query('DELETE FROM leases WHERE tenant_id = $1 AND budget_id = $2 AND lease_id = $3', [
      tenant,
      budgetId,
      leaseId,
    ]);
  }

  async claimReport(tenant: string, budgetId: string, holder: string, seq: number, at: string): Promise<boolean> {
    const { rows } = await this.#sql.query(
      `INSERT INTO lease_reports AS r (tenant_id, budget_id, holder, seq, counted_at)
       VALUES ($1, $2, $3, $4, $5::text::timestamptz)
       ON CONFLICT (tenant_id, budget_id, holder) DO UPDATE SET seq = excluded.seq, counted_at = excluded.counted_at
         WHERE r.seq < excluded.seq
       RETURNING 1`,
      [tenant, budgetId, holder, seq, at],
    );
    return rows.length > 0;
  }

  async reports(tenant: string, budgetId: string): Promise<LeaseReport[]> {
    const { rows } = await this.#sql.query<{ holder: string; seq: string; counted_at: Date }>(
      'SELECT holder, seq, counted_at FROM lease_reports WHERE tenant_id = $1 AND budget_id = $2 ORDER BY holder',
      [tenant, budgetId],
    );
    return rows.map((r) => ({ holder: r.holder, seq: int(r.seq), counted_at: r.counted_at.toISOString() }));
  }

  removeExpiredBefore(tenant: string, before: string, _after: string | null, limit: number): Promise<RemovedSlice> {
    return this.#removeBefore('leases', 'lease_id', 'expires_at', tenant, before, limit);
  }

  removeReportsBefore(tenant: string, before: string, _after: string | null, limit: number): Promise<RemovedSlice> {
    return this.#removeBefore('lease_reports', 'holder', 'counted_at', tenant, before, limit);
  }

  /**
   * Removes at most `limit` of the tenant's rows of `table` whose `column` is before `before`,
   * over the `(tenant_id, column)` index: while a slice comes back full the walk goes on, from the
   * oldest left.
   */
  async #removeBefore(
    table: 'leases' | 'lease_reports',
    key: 'lease_id' | 'holder',
    column: 'expires_at' | 'counted_at',
    tenant: string,
    before: string,
    limit: number,
  ): Promise<RemovedSlice> {
    const { rowCount } = await this.#sql.query(
      `DELETE FROM ${table} WHERE (tenant_id, budget_id, ${key}) IN (
         SELECT tenant_id, budget_id, ${key} FROM ${table}
         WHERE tenant_id = $1 AND ${column} < $2::text::timestamptz LIMIT $3
       )`,
      [tenant, before, limit],
    );
    const removed = rowCount ?? 0;
    return { removed, next: removed < limit ? null : '' };
  }

  async addSpend(
    tenant: string,
    budgetId: string,
    periodStart: string,
    side: 'reported' | 'applied',
    spend: Spend,
  ): Promise<void> {
    // Spend was spent and cannot be refused: a total stays at its maximum (see `Overflow`). Summed
    // as numeric, so that no figure, nor a total stored before totals were held, overflows bigint.
    const bounded = { tokens: Math.min(spend.tokens, MAX_TOTAL), micros: Math.min(spend.micros, MAX_TOTAL) };
    const reported = side === 'reported' ? bounded : { tokens: 0, micros: 0 };
    const applied = side === 'applied' ? bounded : { tokens: 0, micros: 0 };
    // Totals of another period start again from zero.
    const add = (column: string) =>
      `${column} = LEAST(CASE WHEN s.period_start = excluded.period_start THEN s.${column} ELSE 0 END::numeric
         + excluded.${column}, ${MAX_TOTAL})`;
    await this.#sql.query(
      `INSERT INTO lease_spend AS s (tenant_id, budget_id, period_start, reported_tokens, reported_micros,
         applied_tokens, applied_micros)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (tenant_id, budget_id) DO UPDATE SET
         ${['reported_tokens', 'reported_micros', 'applied_tokens', 'applied_micros'].map(add).join(', ')},
         period_start = excluded.period_start`,
      [tenant, budgetId, periodStart, reported.tokens, reported.micros, applied.tokens, applied.micros],
    );
  }
}
