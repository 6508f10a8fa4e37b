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

/**
 * Taken by every creation of a key by a key and by every revocation, until commit: a key created
 * while its creator is being revoked is either seen by the revocation or refused.
 */
const KEY_TREE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('svc.api_key_tree'))";

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

  async holdUnrevoked(keyId: string): Promise<boolean> {
    await this.#sql.query(KEY_TREE_LOCK);
    const { rowCount } = await this.#sql.query('SELECT 1 FROM api_keys WHERE key_id = $1 AND revoked_at IS NULL', [
      keyId,
    ]);
    return rowCount !== 0;
  }

  async insert(tenant: string, key: ApiKeyRecord): Promise<void> {
    const { rowCount } = await this.#sql.query(
      'INSERT INTO api_keys (key_id, tenant_id, revoked_at, doc) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
      [key.id, tenant, key.revoked_at, JSON.stringify(key)],
    );
    if (rowCount === 0) throw taken('id', key.id, `API key ${key.id} already exists`);
  }

  /** With every key it created, and theirs, in any tenant (an administrator's key creates keys for others). */
  async revoke(tenant: string, keyId: string, at: string): Promise<ApiKeyRecord | undefined> {
    await this.#sql.query(KEY_TREE_LOCK);
    const { rows } = await this.#sql.query<Row>(
      `WITH RECURSIVE tree (key_id) AS (
         SELECT key_id FROM api_keys WHERE tenant_id = $1 AND key_id = $2
         UNION SELECT k.key_id FROM api_keys k JOIN tree ON k.doc->>'created_by' = tree.key_id
       ), revoked AS (
         UPDATE api_keys SET revoked_at = $3 FROM tree WHERE api_keys.key_id = tree.key_id AND api_keys.revoked_at IS NULL
         RETURNING api_keys.key_id, api_keys.revoked_at, api_keys.doc
       )
       SELECT key_id, revoked_at, doc FROM revoked WHERE key_id = $2`,
      [tenant, keyId, at],
    );
    return rows[0] === undefined ? this.get(tenant, keyId) : record(rows[0]);
  }
}
