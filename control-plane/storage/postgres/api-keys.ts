import type { ApiKeyRecord } from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { ApiKeyRepository, Page, PageRequest } from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sql } from './sql.ts';

interface Row {
  key_id: string;
  revoked_at: string | null;
  doc: ApiKeyRecord;
}

const record = (row: Row): ApiKeyRecord => ({ ...row.doc, revoked_at: row.revoked_at });

/** Key ids are the primary key, unique across tenants; every read but `tenantOf` names the tenant. */
export class PgApiKeys implements ApiKeyRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    const { rows } = await this.#sql.query<Row>(
      'SELECT key_id, revoked_at, doc FROM api_keys WHERE tenant_id = $1 AND key_id = $2',
      [tenant, keyId],
    );
    return rows[0] === undefined ? undefined : record(rows[0]);
  }

  async list(tenant: string, request?: PageRequest): Promise<Page<ApiKeyRecord>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      `SELECT key_id, revoked_at, doc FROM api_keys WHERE tenant_id = $1 AND ($2::text IS NULL OR key_id > $2)
       ORDER BY key_id LIMIT $3`,
      [tenant, after, size + 1],
    );
    return pageOf(rows, size, (r) => r.key_id, record);
  }

  async tenantOf(keyId: string): Promise<string | undefined> {
    const { rows } = await this.#sql.query<{ tenant_id: string }>('SELECT tenant_id FROM api_keys WHERE key_id = $1', [
      keyId,
    ]);
    return rows[0]?.tenant_id;
  }

  async insert(tenant: string, key: ApiKeyRecord): Promise<void> {
    const { rowCount } = await this.#sql.query(
      'INSERT INTO api_keys (key_id, tenant_id, revoked_at, doc) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
      [key.id, tenant, key.revoked_at, JSON.stringify(key)],
    );
    if (rowCount === 0) throw taken('id', key.id, `API key ${key.id} already exists`);
  }

  async revoke(tenant: string, keyId: string, at: string): Promise<ApiKeyRecord | undefined> {
    const { rows } = await this.#sql.query<Row>(
      `UPDATE api_keys SET revoked_at = $3 WHERE tenant_id = $1 AND key_id = $2 AND revoked_at IS NULL
       RETURNING key_id, revoked_at, doc`,
      [tenant, keyId, at],
    );
    return rows[0] === undefined ? this.get(tenant, keyId) : record(rows[0]);
  }
}
