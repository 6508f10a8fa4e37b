import type { Policy } from '../../../core/policy/index.ts';
import { taken } from '../conflict.ts';
import type { Page, PageRequest, PolicyRepository } from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import { int, type Sql } from './sql.ts';

interface Row {
  policy_id: string;
  doc: Policy;
}

export class PgPolicies implements PolicyRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, policyId: string): Promise<Policy | undefined> {
    const { rows } = await this.#sql.query<Row>('SELECT doc FROM policies WHERE tenant_id = $1 AND policy_id = $2', [
      tenant,
      policyId,
    ]);
    return rows[0]?.doc;
  }

  async list(tenant: string, request?: PageRequest): Promise<Page<Policy>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      `SELECT policy_id, doc FROM policies WHERE tenant_id = $1 AND ($2::text IS NULL OR policy_id > $2)
       ORDER BY policy_id LIMIT $3`,
      [tenant, after, size + 1],
    );
    return pageOf(
      rows,
      size,
      (r) => r.policy_id,
      (r) => r.doc,
    );
  }

  async version(tenant: string): Promise<number> {
    const { rows } = await this.#sql.query<{ version: string }>(
      'SELECT version FROM ruleset_versions WHERE tenant_id = $1',
      [tenant],
    );
    return rows[0] === undefined ? 0 : int(rows[0].version);
  }

  async insert(tenant: string, policy: Policy): Promise<void> {
    const { rowCount } = await this.#sql.query(
      'INSERT INTO policies (tenant_id, policy_id, doc) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
      [tenant, policy.policy_id, JSON.stringify(policy)],
    );
    if (rowCount === 0) throw taken('policy_id', policy.policy_id, `policy ${policy.policy_id} already exists`);
  }

  async bumpVersion(tenant: string): Promise<number> {
    const { rows } = await this.#sql.query<{ version: string }>(
      `INSERT INTO ruleset_versions (tenant_id, version) VALUES ($1, 1)
       ON CONFLICT (tenant_id) DO UPDATE SET version = ruleset_versions.version + 1
       RETURNING version`,
      [tenant],
    );
    return int(rows[0]!.version);
  }

  async replace(tenant: string, policy: Policy, expectedVersion: number): Promise<boolean> {
    const { rowCount } = await this.#sql.query(
      `UPDATE policies SET doc = $3 WHERE tenant_id = $1 AND policy_id = $2 AND (doc->>'version')::bigint = $4`,
      [tenant, policy.policy_id, JSON.stringify(policy), expectedVersion],
    );
    return rowCount === 1;
  }

  async remove(tenant: string, policyId: string): Promise<boolean> {
    const { rowCount } = await this.#sql.query('DELETE FROM policies WHERE tenant_id = $1 AND policy_id = $2', [
      tenant,
      policyId,
    ]);
    return (rowCount ?? 0) > 0;
  }
}
