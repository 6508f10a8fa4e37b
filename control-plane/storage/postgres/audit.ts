import type { AuditRecord } from '../../../core/domain/index.ts';
import { GENESIS, sealAuditRecord, type AuditDraft } from '../../audit/chain.ts';
import type { AuditHead } from '../records.ts';
import type { AuditFilter, AuditRepository, Page, PageRequest } from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import { int, type Sql } from './sql.ts';

interface Row {
  seq: string;
  doc: AuditRecord;
}

/**
 * The drafts a transaction appended, sealed when it commits (or before it reads the audit log):
 * the tenant's chain is locked only from then to the commit, after every other write, so that
 * appending never holds the chain while the transaction waits for anything else.
 */
export class AuditDrafts {
  readonly #drafts: Array<{ tenant: string; draft: AuditDraft }> = [];

  add(tenant: string, draft: AuditDraft): void {
    this.#drafts.push({ tenant, draft });
  }

  /**
   * Seals the drafts onto their tenants' chains. Each tenant's appends hold the lock of its row in
   * `audit_heads` until commit, so that writers on every replica extend one chain; tenants are
   * taken in one order, so two transactions appending to the same tenants never deadlock.
   */
  async seal(sql: Sql): Promise<void> {
    if (this.#drafts.length === 0) return;
    const byTenant = new Map<string, AuditDraft[]>();
    for (const { tenant, draft } of this.#drafts.splice(0)) {
      const drafts = byTenant.get(tenant) ?? [];
      drafts.push(draft);
      byTenant.set(tenant, drafts);
    }
    for (const tenant of [...byTenant.keys()].sort()) {
      // Locks the tenant's head row and reads it in one statement: an upsert waits for another
      // writer's lock and then returns the row as that writer committed it. A tenant's first
      // append creates it as the chain's start (sequence 0, the genesis link).
      const { rows } = await sql.query<{ seq: string; hash: string }>(
        `INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ($1, 0, $2)
         ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = excluded.tenant_id
         RETURNING seq, hash`,
        [tenant, GENESIS],
      );
      let head: AuditHead = { seq: int(rows[0]!.seq), hash: rows[0]!.hash };
      const records: AuditRecord[] = [];
      for (const draft of byTenant.get(tenant)!) {
        const record = sealAuditRecord(tenant, head, draft);
        records.push(record);
        head = { seq: record.seq, hash: record.hash };
      }
      // The records and the new head in one statement (a WITH that inserts always runs whole).
      await sql.query(
        `WITH records AS (
           INSERT INTO audit_records (tenant_id, seq, action, resource_type, actor_id, doc)
           SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::json[])
         )
         INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ($1, $7, $8)
         ON CONFLICT (tenant_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`,
        [
          tenant,
          records.map((r) => r.seq),
          records.map((r) => r.action),
          records.map((r) => r.resource.type),
          records.map((r) => r.actor.id),
          records.map((r) => JSON.stringify(r)),
          head.seq,
          head.hash,
        ],
      );
    }
  }
}

export class PgAudit implements AuditRepository {
  readonly #sql: Sql;
  /** A transaction's drafts; none for reads of committed state. */
  readonly #drafts: AuditDrafts | null;

  constructor(sql: Sql, drafts: AuditDrafts | null) {
    this.#sql = sql;
    this.#drafts = drafts;
  }

  async list(tenant: string, filter: AuditFilter, request?: PageRequest): Promise<Page<AuditRecord>> {
    await this.#drafts?.seal(this.#sql);
    const { size, after } = pageStart<number>(request, 'number');
    const newest = filter.order === 'newest';
    const { rows } = await this.#sql.query<Row>(
      `SELECT seq, doc FROM audit_records WHERE tenant_id = $1
         AND ($2::bigint IS NULL OR ${newest ? 'seq < $2' : 'seq > $2'})
         AND ($3::text IS NULL OR action = $3) AND ($4::text IS NULL OR resource_type = $4)
         AND ($5::text IS NULL OR actor_id = $5)
       ORDER BY seq ${newest ? 'DESC' : 'ASC'} LIMIT $6`,
      [tenant, after, filter.action ?? null, filter.resourceType ?? null, filter.actorId ?? null, size + 1],
    );
    return pageOf(
      rows,
      size,
      (r) => int(r.seq),
      (r) => r.doc,
    );
  }

  async head(tenant: string): Promise<AuditHead | undefined> {
    await this.#drafts?.seal(this.#sql);
    const { rows } = await this.#sql.query<{ seq: string; hash: string }>(
      'SELECT seq, hash FROM audit_heads WHERE tenant_id = $1',
      [tenant],
    );
    return rows[0] === undefined ? undefined : { seq: int(rows[0].seq), hash: rows[0].hash };
  }

  append(tenant: string, draft: AuditDraft): Promise<void> {
    if (this.#drafts === null) return Promise.reject(new Error('storage write outside a transaction'));
    this.#drafts.add(tenant, draft);
    return Promise.resolve();
  }
}
