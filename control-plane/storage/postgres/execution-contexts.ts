import type { ExecutionContext } from '../../checkpoints/checkpoint.ts';
import type { ExecutionContextRepository, Page, PageRequest } from '../storage.ts';
import { executionAdmitted } from './execution-quota.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sql } from './sql.ts';

/** Execution contexts; `version` in a column of its own, compared and set in one statement. */
export class PgExecutionContexts implements ExecutionContextRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, executionId: string): Promise<ExecutionContext | undefined> {
    const { rows } = await this.#sql.query<{ doc: ExecutionContext }>(
      'SELECT doc FROM execution_contexts WHERE tenant_id = $1 AND execution_id = $2',
      [tenant, executionId],
    );
    return rows[0]?.doc;
  }

  async list(tenant: string, request?: PageRequest): Promise<Page<ExecutionContext>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<{ execution_id: string; doc: ExecutionContext }>(
      `SELECT execution_id, doc FROM execution_contexts WHERE tenant_id = $1 AND ($2::text IS NULL OR execution_id > $2)
       ORDER BY execution_id LIMIT $3`,
      [tenant, after, size + 1],
    );
    return pageOf(
      rows,
      size,
      (r) => r.execution_id,
      (r) => r.doc,
    );
  }

  admit(tenant: string, executionId: string, max: number): Promise<boolean> {
    return executionAdmitted(this.#sql, 'execution_contexts', tenant, executionId, max);
  }

  async removeUpdatedBefore(tenant: string, before: string, limit: number): Promise<number> {
    const { rowCount } = await this.#sql.query(
      `DELETE FROM execution_contexts WHERE tenant_id = $1 AND execution_id IN (
         SELECT execution_id FROM execution_contexts WHERE tenant_id = $1 AND doc->>'updated_at' < $2 LIMIT $3
       )`,
      [tenant, before, limit],
    );
    return rowCount ?? 0;
  }

  async put(tenant: string, context: ExecutionContext, expectedVersion: number): Promise<boolean> {
    // A concurrent writer's row (or its insert of the first one) makes this statement wait for it,
    // then see its version: the loser changes nothing.
    const { rowCount } =
      expectedVersion === 0
        ? await this.#sql.query(
            `INSERT INTO execution_contexts (tenant_id, execution_id, version, doc) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING`,
            [tenant, context.execution_id, context.version, JSON.stringify(context)],
          )
        : await this.#sql.query(
            `UPDATE execution_contexts SET version = $3, doc = $4
             WHERE tenant_id = $1 AND execution_id = $2 AND version = $5`,
            [tenant, context.execution_id, context.version, JSON.stringify(context), expectedVersion],
          );
    return rowCount === 1;
  }
}
