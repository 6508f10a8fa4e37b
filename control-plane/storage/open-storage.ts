import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../core/config/schema.ts';
import { SvcError } from '../../core/errors/index.ts';
import { LmdbStorage } from './lmdb/lmdb-storage.ts';
import type { Storage } from './storage.ts';

/**
 * The storage backend the configuration asks for: LMDB under `<data_dir>/control-plane` unless
 * `database_url` names a PostgreSQL server. Brings the schema to this build's version first.
 */
export async function openStorage(config: Config, logger: Logger): Promise<Storage> {
  if (config.database_url !== undefined) {
    // The URL holds a password: the message names the setting, never its value.
    throw new SvcError(
      'SVC-SYS-9002',
      'invalid configuration: SVC_DATABASE_URL: PostgreSQL backend not available in this build',
      {},
      [{ field: 'SVC_DATABASE_URL', description: 'PostgreSQL backend not available in this build' }],
    );
  }
  mkdirSync(config.data_dir, { recursive: true });
  const { storage, applied } = await LmdbStorage.open({
    path: join(config.data_dir, 'control-plane'),
    // /health is public: the cause goes to the log, not to whoever asks.
    onCheckFailure: (error) => logger.error({ err: error }, 'storage check failed'),
  });
  if (applied.length > 0)
    logger.info(
      { backend: storage.backend, applied, schema_version: await storage.schemaVersion() },
      'storage migrated',
    );
  return storage;
}
