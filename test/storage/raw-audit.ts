import { join } from 'node:path';
import pg from 'pg';
import type { AuditRecord } from '../../core/domain/index.ts';
import { rawLmdb } from './lmdb-raw.ts';

/**
 * A control plane's stored audit records as they lie in its storage (LMDB on disk, or the rows
 * of its PostgreSQL database), for tests that change them the way someone with access to the
 * volume or the database could: the chain's verification must notice.
 */
export interface RawAudit {
  get(tenant: string, seq: number): Promise<AuditRecord>;
  put(tenant: string, seq: number, record: AuditRecord): Promise<void>;
  remove(tenant: string, seq: number): Promise<void>;
  close(): Promise<void>;
}

/** Open while the control plane is stopped (LMDB: one process opens an environment once). */
export async function rawAudit(store: { dataDir: string; databaseUrl: string | null }): Promise<RawAudit> {
  if (store.databaseUrl === null) {
    const raw = rawLmdb(join(store.dataDir, 'control-plane'));
    return {
      get: (tenant, seq) => Promise.resolve(raw.get<AuditRecord>(tenant, 'audit', seq)!),
      put: (tenant, seq, record) => Promise.resolve(raw.put(tenant, 'audit', seq, record)),
      remove: (tenant, seq) => Promise.resolve(raw.remove(tenant, 'audit', seq)),
      close: () => raw.close(),
    };
  }
  const client = new pg.Client({ connectionString: store.databaseUrl });
  await client.connect();
  return {
    async get(tenant, seq) {
      const { rows } = await client.query<{ doc: AuditRecord }>(
        'SELECT doc FROM audit_records WHERE tenant_id = $1 AND seq = $2',
        [tenant, seq],
      );
      return rows[0]!.doc;
    },
    async put(tenant, seq, record) {
      await client.query('UPDATE audit_records SET doc = $3 WHERE tenant_id = $1 AND seq = $2', [
        tenant,
        seq,
        JSON.stringify(record),
      ]);
    },
    async remove(tenant, seq) {
      await client.query('DELETE FROM audit_records WHERE tenant_id = $1 AND seq = $2', [tenant, seq]);
    },
    close: () => client.end(),
  };
}
