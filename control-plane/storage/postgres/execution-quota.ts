import type { Sql } from './sql.ts';

/**
 * Whether the tenant may keep state for the execution in `table` (keyed by tenant and execution
 * id): it has a row there already, or the tenant has fewer than `max`. Executions new to the table
 * are admitted one at a time per tenant until commit, on every replica, so concurrent ones cannot
 * all take the last place.
 */
export async function executionAdmitted(
  sql: Sql,
  table: 'checkpoint_heads' | 'execution_contexts',
  tenant: string,
  executionId: string,
  max: number,
): Promise<boolean> {
  const held = `SELECT 1 FROM ${table} WHERE tenant_id = $1 AND execution_id = $2`;
  if ((await sql.query(held, [tenant, executionId])).rowCount !== 0) return true;
  await sql.query('SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))', [`svc.${table}`, tenant]);
  if ((await sql.query(held, [tenant, executionId])).rowCount !== 0) return true;
  const { rows } = await sql.query<{ n: string }>(
    `SELECT count(*) AS n FROM (SELECT 1 FROM ${table} WHERE tenant_id = $1 LIMIT $2) held`,
    [tenant, max],
  );
  return Number(rows[0]?.n ?? 0) < max;
}
