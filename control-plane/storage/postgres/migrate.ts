import { readdir, readFile } from 'node:fs/promises';
import type { Pool } from 'pg';
import { SvcError } from '../../../core/errors/index.ts';

export interface SqlMigration {
  version: number;
  name: string;
  sql: string;
}

/** The numbered SQL files shipped beside this module (`migrations/0001_initial.sql`, …). */
export const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** Every `NNNN_name.sql` of `dir`, in version order. A migration never changes once released. */
export async function loadMigrations(dir: URL = MIGRATIONS_DIR): Promise<SqlMigration[]> {
  const migrations: SqlMigration[] = [];
  for (const file of await readdir(dir)) {
    const match = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
    if (match === null) continue;
    migrations.push({
      version: Number(match[1]),
      name: match[2]!,
      sql: await readFile(new URL(file, dir), 'utf8'),
    });
  }
  return migrations.sort((a, b) => a.version - b.version);
}

/**
 * Brings the database to the newest migration, each in a transaction of its own recorded in
 * `schema_migrations`; returns the versions applied. A session advisory lock is held throughout,
 * so replicas starting together migrate once: the others wait, then find nothing left to do. A
 * database of a newer schema than `migrations` know is refused (SVC-SYS-9001), never misread.
 */
export async function migrate(pool: Pool, migrations: readonly SqlMigration[]): Promise<number[]> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query("SELECT pg_advisory_lock(hashtext('svc.schema_migrations'))");
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
      const stored = new Set(rows.map((r) => r.version));
      const newest = Math.max(0, ...migrations.map((m) => m.version));
      const storedNewest = Math.max(0, ...stored);
      if (storedNewest > newest) {
        throw new SvcError(
          'SVC-SYS-9001',
          `storage schema version ${storedNewest} is newer than this build knows (${newest}); run a build at least as new`,
          { schema_version: storedNewest, supported: newest },
        );
      }
      const applied: number[] = [];
      for (const migration of migrations) {
        if (stored.has(migration.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
            migration.version,
            migration.name,
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        }
        applied.push(migration.version);
      }
      return applied;
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext('svc.schema_migrations'))").catch(() => {
        broken = true;
      });
    }
  } catch (error) {
    broken = true;
    throw error;
  } finally {
    client.release(broken);
  }
}
