import type { DedupRepository, RemovedSlice } from '../storage.ts';
import { int, type Sql } from './sql.ts';

export class PgDedup implements DedupRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async markProcessed(tenant: string, scope: string, messageId: string, at: string): Promise<boolean> {
    // A concurrent first handling waits for the other transaction: only one of them learns "first".
    const { rowCount } = await this.#sql.query(
      `INSERT INTO processed_messages (tenant_id, scope, message_id, processed_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING`,
      [tenant, scope, messageId, at],
    );
    return rowCount === 1;
  }

  async removeProcessedBefore(
    tenant: string,
    scope: string,
    before: string,
    after: string | null,
    limit: number,
  ): Promise<RemovedSlice> {
    // A slice of the primary key: each statement looks at `limit` rows at most.
    const { rows } = await this.#sql.query<{ looked: string; last: string | null; removed: string }>(
      `WITH looked AS (
         SELECT message_id, processed_at < $3::timestamptz AS old FROM processed_messages
         WHERE tenant_id = $1 AND scope = $2 AND ($4::text IS NULL OR message_id > $4)
         ORDER BY message_id LIMIT $5
       ), removed AS (
         DELETE FROM processed_messages p USING looked l
         WHERE p.tenant_id = $1 AND p.scope = $2 AND p.message_id = l.message_id AND l.old
         RETURNING 1
       )
       SELECT (SELECT count(*) FROM looked) AS looked, (SELECT max(message_id) FROM looked) AS last,
              (SELECT count(*) FROM removed) AS removed`,
      [tenant, scope, before, after, limit],
    );
    const row = rows[0]!;
    return { removed: int(row.removed), next: int(row.looked) < limit ? null : row.last };
  }
}
