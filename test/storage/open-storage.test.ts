import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadMigrations } from '../../control-plane/storage/postgres/migrate.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config/load.ts';
import { configuredSecrets, createScrubber } from '../../core/observability/redact.ts';
import { openStorage } from '../../control-plane/storage/open-storage.ts';
import { freePort } from '../harness/free-port.ts';
import { createTestDatabase, postgresReachable, type TestDatabase } from '../harness/postgres.ts';

const pgAvailable = await postgresReachable();

const ROOT_DIR = new URL('../..', import.meta.url).pathname;
const PASSWORD = 'hunter2-database-password';
const DATABASE_URL = `postgres://svc:${PASSWORD}@127.0.0.1:5432/svc`;

const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'open-storage-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('the storage the configuration picks', () => {
  it('is LMDB under <data_dir>/control-plane without database_url', async () => {
    const dataDir = freshDir();
    const storage = await openStorage(loadConfig({}, { data_dir: dataDir }), pino({ level: 'silent' }));
    try {
      expect(storage.backend).toBe('lmdb');
      expect(existsSync(join(dataDir, 'control-plane', 'data.mdb'))).toBe(true);
      expect(await storage.health()).toEqual({ status: 'ok' });
    } finally {
      await storage.close();
    }
  });

  it('makes the LMDB store readable by its user only, tightening one an earlier version made', async () => {
    const mode = (path: string) => statSync(path).mode & 0o777;
    const dataDir = join(freshDir(), 'data');
    const open = () => openStorage(loadConfig({}, { data_dir: dataDir }), pino({ level: 'silent' }));
    await (await open()).close();
    const env = join(dataDir, 'control-plane');
    expect([dataDir, env].map(mode)).toEqual([0o700, 0o700]);
    expect(['data.mdb', 'lock.mdb'].map((file) => mode(join(env, file)))).toEqual([0o600, 0o600]);
    chmodSync(env, 0o755);
    for (const file of ['data.mdb', 'lock.mdb']) chmodSync(join(env, file), 0o644);
    await (await open()).close();
    expect([env, join(env, 'data.mdb'), join(env, 'lock.mdb')].map(mode)).toEqual([0o700, 0o600, 0o600]);
  });

  it('takes database_url as a postgres URL and a pool size, refusing anything else by name and without echoing it', () => {
    const config = loadConfig({ SVC_DATABASE_URL: DATABASE_URL });
    expect(config.database_url).toBe(DATABASE_URL);
    expect(config.database_pool_size).toBe(10);
    expect(loadConfig({ SVC_DATABASE_URL: DATABASE_URL, SVC_DATABASE_POOL_SIZE: '25' }).database_pool_size).toBe(25);
    for (const url of [`mysql://svc:${PASSWORD}@db/svc`, `not a url ${PASSWORD}`]) {
      let refused: unknown;
      try {
        loadConfig({ SVC_DATABASE_URL: url });
      } catch (error) {
        refused = error;
      }
      expect(refused).toMatchObject({ code: 'SVC-SYS-9002', fieldViolations: [{ field: 'SVC_DATABASE_URL' }] });
      expect(JSON.stringify(refused) + String((refused as Error).message)).not.toContain(PASSWORD);
    }
    expect(() => loadConfig({ SVC_DATABASE_POOL_SIZE: '0' })).toThrow(/SVC_DATABASE_POOL_SIZE/);
  });

  it('treats the URL as a secret the log scrubber removes', () => {
    const secrets = configuredSecrets(loadConfig({ SVC_DATABASE_URL: DATABASE_URL }));
    expect(secrets).toContain(DATABASE_URL);
    const scrubbed = createScrubber(secrets).value({
      msg: `connecting to ${DATABASE_URL}`,
      database_url: DATABASE_URL,
    });
    expect(JSON.stringify(scrubbed)).not.toContain(PASSWORD);
  });

  it('stops a control plane whose database refuses it at start, naming neither the URL nor its password', async () => {
    const dataDir = freshDir();
    const child = spawn(process.execPath, ['control-plane/main.ts'], {
      cwd: ROOT_DIR,
      env: {
        ...process.env,
        // A port nothing listens on: the start fails on the connection, whatever the machine runs.
        SVC_DATABASE_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${await freePort()}/svc`,
        SVC_DATA_DIR: dataDir,
        SVC_HTTP_PORT: String(await freePort()),
        SVC_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(output).toContain('ECONNREFUSED');
    expect(output).not.toContain(PASSWORD);
    // Nothing was opened on the way: no LMDB environment stands in for the database.
    expect(existsSync(join(dataDir, 'control-plane'))).toBe(false);
  });

  describe.skipIf(!pgAvailable)('with database_url', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('is PostgreSQL, migrated, and says so in the log with the schema version and without the URL', async () => {
      const lines: string[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
      const dataDir = freshDir();
      const storage = await openStorage(
        loadConfig({}, { data_dir: dataDir, database_url: database.url, database_pool_size: 2 }),
        logger,
      );
      try {
        expect(storage.backend).toBe('postgres');
        expect(await storage.health()).toEqual({ status: 'ok' });
        const opened = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.backend);
        const versions = (await loadMigrations()).map((m) => m.version);
        expect(opened).toMatchObject({ backend: 'postgres', schema_version: Math.max(...versions), applied: versions });
        expect(lines.join('\n')).not.toContain(database.url);
        expect(existsSync(join(dataDir, 'control-plane'))).toBe(false);
      } finally {
        await storage.close();
      }
    });
  });
});
