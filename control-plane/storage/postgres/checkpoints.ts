import { MAX_VERSION, type Checkpoint, type CheckpointOrder } from '../../checkpoints/checkpoint.ts';
import { versionsExhausted } from '../../checkpoints/errors.ts';
import { taken } from '../conflict.ts';
import { decodePageToken, encodePageToken, pageSizeOf } from '../paging.ts';
import type { CheckpointFilter, CheckpointRepository, Page, PageRequest } from '../storage.ts';
import { executionAdmitted } from './execution-quota.ts';
import { pageOf, pageStart } from './pages.ts';
import { int, type Sql } from './sql.ts';

interface Row {
  execution_id: string;
  version: number;
  created_at: string;
  deleted_at: string | null;
  doc: Checkpoint;
}

const COLUMNS = 'execution_id, version, created_at, deleted_at, doc';
const checkpointOf = (row: Row): Checkpoint => ({ ...row.doc, deleted_at: row.deleted_at });
/** A non-empty list narrows; an empty one is no condition (null). */
const list = <T>(values: readonly T[] | undefined): T[] | null =>
  values === undefined || values.length === 0 ? null : [...values];

/**
 * Checkpoints, one row per execution version, with `checkpoint_heads` holding each execution's
 * highest version ever. The soft-delete mark lives in its column only; `doc` is the record as saved.
 */
export class PgCheckpoints implements CheckpointRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, executionId: string, version: number): Promise<Checkpoint | undefined> {
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM checkpoints WHERE tenant_id = $1 AND execution_id = $2 AND version = $3`,
      [tenant, executionId, version],
    );
    return rows[0] === undefined ? undefined : checkpointOf(rows[0]);
  }

  async latest(tenant: string, checkpointId: string): Promise<Checkpoint | undefined> {
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM checkpoints WHERE tenant_id = $1 AND checkpoint_id = $2 ORDER BY version DESC LIMIT 1`,
      [tenant, checkpointId],
    );
    return rows[0] === undefined ? undefined : checkpointOf(rows[0]);
  }

  async versions(tenant: string, executionId: string, request?: PageRequest): Promise<Page<Checkpoint>> {
    const { size, after } = pageStart<number>(request, 'number');
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM checkpoints WHERE tenant_id = $1 AND execution_id = $2 AND deleted_at IS NULL
         AND ($3::integer IS NULL OR version < $3)
       ORDER BY version DESC LIMIT $4`,
      [tenant, executionId, after, size + 1],
    );
    return pageOf(rows, size, (r) => r.version, checkpointOf);
  }

  async query(
    tenant: string,
    f: CheckpointFilter,
    order: CheckpointOrder,
    request?: PageRequest,
  ): Promise<Page<Checkpoint>> {
    const size = pageSizeOf(request);
    const after = decodePageToken(request, ['string', 'number', 'string']) ?? [null, null, null];
    const desc = order === 'created_at desc';
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM checkpoints WHERE tenant_id = $1 AND ($17::boolean OR deleted_at IS NULL)
         AND ($2::text[] IS NULL OR envelope_id = ANY($2))
         AND ($3::text[] IS NULL OR execution_id = ANY($3))
         AND ($4::text[] IS NULL OR type = ANY($4))
         AND ($5::text IS NULL OR created_at >= $5) AND ($6::text IS NULL OR created_at <= $6)
         AND ($7::text[] IS NULL OR framework_type = ANY($7))
         AND tags @> $8::jsonb
         AND ($9::float8 IS NULL OR cost_snapshot_usd >= $9) AND ($10::float8 IS NULL OR cost_snapshot_usd <= $10)
         AND ($11::bigint IS NULL OR size_bytes >= $11) AND ($12::bigint IS NULL OR size_bytes <= $12)
         AND ($13::text IS NULL OR (created_at, version, execution_id) ${desc ? '<' : '>'} ($13, $14::integer, $15::text))
       ORDER BY created_at ${desc ? 'DESC' : 'ASC'}, version ${desc ? 'DESC' : 'ASC'}, execution_id ${desc ? 'DESC' : 'ASC'}
       LIMIT $16`,
      [
        tenant,
        list(f.envelopeIds),
        list(f.executionIds),
        list(f.types),
        f.createdAfter ?? null,
        f.createdBefore ?? null,
        list(f.frameworkTypes),
        JSON.stringify(f.tags ?? {}),
        f.minCostUsd ?? null,
        f.maxCostUsd ?? null,
        f.minSizeBytes ?? null,
        f.maxSizeBytes ?? null,
        ...after,
        size + 1,
        f.includeDeleted === true,
      ],
    );
    const items = rows.slice(0, size);
    const last = items.at(-1);
    return {
      items: items.map(checkpointOf),
      nextPageToken:
        rows.length > size && last !== undefined
          ? encodePageToken([last.created_at, last.version, last.execution_id])
          : null,
    };
  }

  async insert(tenant: string, checkpoint: Checkpoint, version: 'next' | 'given'): Promise<Checkpoint> {
    // Two saves naming one new checkpoint id for two executions would each find it free.
    await this.#sql.query("SELECT pg_advisory_xact_lock(hashtext('svc.checkpoint_id'), hashtext($1))", [
      `${tenant}/${checkpoint.checkpoint_id}`,
    ]);
    const owner = await this.#sql.query<{ execution_id: string }>(
      'SELECT execution_id FROM checkpoints WHERE tenant_id = $1 AND checkpoint_id = $2 LIMIT 1',
      [tenant, checkpoint.checkpoint_id],
    );
    const ownerId = owner.rows[0]?.execution_id;
    if (ownerId !== undefined && ownerId !== checkpoint.execution_id)
      throw taken(
        'checkpoint.checkpoint_id',
        checkpoint.checkpoint_id,
        `checkpoint ${checkpoint.checkpoint_id} belongs to another execution`,
        'belongs to another execution',
      );
    const head = await this.#sql.query<{ version: number }>(
      version === 'next'
        ? `INSERT INTO checkpoint_heads AS h (tenant_id, execution_id, version) VALUES ($1, $2, 1)
           ON CONFLICT (tenant_id, execution_id) DO UPDATE SET version = h.version + 1 WHERE h.version < $3
           RETURNING version`
        : `INSERT INTO checkpoint_heads AS h (tenant_id, execution_id, version) VALUES ($1, $2, $3)
           ON CONFLICT (tenant_id, execution_id) DO UPDATE SET version = GREATEST(h.version, EXCLUDED.version)
           RETURNING version`,
      [tenant, checkpoint.execution_id, version === 'next' ? MAX_VERSION : checkpoint.version],
    );
    // No row: the execution is at the last version already.
    if (head.rows[0] === undefined) throw versionsExhausted(checkpoint.execution_id, MAX_VERSION);
    const stored: Checkpoint = version === 'next' ? { ...checkpoint, version: int(head.rows[0].version) } : checkpoint;
    const { rowCount } = await this.#sql.query(
      `INSERT INTO checkpoints (tenant_id, execution_id, version, checkpoint_id, envelope_id, type, framework_type,
         cost_snapshot_usd, size_bytes, tags, created_at, deleted_at, doc)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
      [
        tenant,
        stored.execution_id,
        stored.version,
        stored.checkpoint_id,
        stored.envelope_id,
        stored.metadata.type,
        stored.metadata.framework_type,
        stored.metadata.cost_snapshot_usd,
        stored.size_bytes,
        JSON.stringify(stored.metadata.tags),
        stored.created_at,
        stored.deleted_at,
        JSON.stringify(stored),
      ],
    );
    if (rowCount === 0)
      throw taken(
        'checkpoint.version',
        String(stored.version),
        `execution ${stored.execution_id} has a version ${stored.version} already`,
      );
    return stored;
  }

  admitExecution(tenant: string, executionId: string, max: number): Promise<boolean> {
    return executionAdmitted(this.#sql, 'checkpoint_heads', tenant, executionId, max);
  }

  async removeCreatedBefore(tenant: string, before: string, limit: number): Promise<number> {
    const { rows } = await this.#sql.query<{ execution_id: string }>(
      `DELETE FROM checkpoints c USING (
         SELECT execution_id, version FROM checkpoints WHERE tenant_id = $1 AND created_at < $2
         ORDER BY created_at, version, execution_id LIMIT $3
       ) doomed
       WHERE c.tenant_id = $1 AND c.execution_id = doomed.execution_id AND c.version = doomed.version
       RETURNING c.execution_id`,
      [tenant, before, limit],
    );
    // A statement of its own: it sees the rows the one above removed as gone.
    await this.#sql.query(
      `DELETE FROM checkpoint_heads h WHERE h.tenant_id = $1 AND h.execution_id = ANY($2::text[])
         AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.tenant_id = $1 AND c.execution_id = h.execution_id)`,
      [tenant, [...new Set(rows.map((r) => r.execution_id))]],
    );
    return rows.length;
  }

  async prune(tenant: string, executionId: string, keep: number): Promise<number> {
    const { rowCount } = await this.#sql.query(
      `DELETE FROM checkpoints WHERE tenant_id = $1 AND execution_id = $2 AND version IN (
         SELECT version FROM checkpoints WHERE tenant_id = $1 AND execution_id = $2 ORDER BY version DESC OFFSET $3)`,
      [tenant, executionId, keep],
    );
    return rowCount ?? 0;
  }

  async delete(
    tenant: string,
    executionId: string,
    checkpointId: string | null,
    mode: { soft: string } | 'hard',
  ): Promise<number> {
    const where = 'tenant_id = $1 AND execution_id = $2 AND ($3::text IS NULL OR checkpoint_id = $3)';
    const { rowCount } =
      mode === 'hard'
        ? await this.#sql.query(`DELETE FROM checkpoints WHERE ${where}`, [tenant, executionId, checkpointId])
        : await this.#sql.query(`UPDATE checkpoints SET deleted_at = COALESCE(deleted_at, $4) WHERE ${where}`, [
            tenant,
            executionId,
            checkpointId,
            mode.soft,
          ]);
    return rowCount ?? 0;
  }
}
