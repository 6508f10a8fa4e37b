import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../core/config/schema.ts';
import { LmdbStorage } from './lmdb/lmdb-storage.ts';
import { PostgresStorage } from './postgres/postgres-storage.ts';
import type { Storage } from './storage.ts';

/**
 * The storage backend the configuration asks for: LMDB under `<data_dir>/control-plane` unless
 * `database_url` names a PostgreSQL server. Brings the schema to this build's version first.
 */
export async function openStorage(config: Config, logger: Logger): Promise<Storage> {
  // /health is public: the cause of a failed check goes to the log, not to whoever asks.
  const onCheckFailure = (error: unknown) => logger.error({ err: error }, 'storage check failed');
  let opened: { storage: Storage; applied: number[] };
  if (config.database_url !== undefined) {
    // The URL holds a password: it goes to the driver only, never into a log line or an error.
    opened = await PostgresStorage.open({
      connectionString: config.database_url,
      poolSize: config.database_pool_size,
      onError: (error) => logger.error({ err: error }, 'storage connection failed'),
    });
  } else {
    opened = await LmdbStorage.open({ path: join(config.data_dir, 'control-plane'), onCheckFailure });
  }
  const { storage, applied } = opened;
  logger.info(
    { backend: storage.backend, applied, schema_version: await storage.schemaVersion() },
    applied.length > 0 ? 'storage migrated' : 'storage opened',
  );
  return storage;
}
