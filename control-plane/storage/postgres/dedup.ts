import type { DedupRepository } from '../storage.ts';
import type { Sql } from './sql.ts';

export class PgDedup implements DedupRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async markProcessed(tenant: string, scope: string, messageId: string): Promise<boolean> {
    // A concurrent first handling waits for the other transaction: only one of them learns "first".
    const { rowCount } = await this.#sql.query(
      'INSERT INTO processed_messages (tenant_id, scope, message_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
      [tenant, scope, messageId],
    );
    return rowCount === 1;
  }
}
