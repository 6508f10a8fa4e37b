import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * PostgreSQL for tests: the local server (127.0.0.1:5432, user postgres, trust) unless
 * SVC_TEST_DATABASE_URL names another server's administrative database. Each test database is
 * created with a unique name and dropped after.
 */
export const ADMIN_URL = process.env.SVC_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Where the server is, without user or password: what a skip line may say. */
function serverName(): string {
  try {
    const url = new URL(ADMIN_URL);
    return `${url.hostname}:${url.port || '5432'}`;
  } catch {
    return 'SVC_TEST_DATABASE_URL';
  }
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

let reachable: Promise<boolean> | undefined;

/**
 * Whether the server answers. When it does not, says so in one line (once per test file), so
 * the PostgreSQL suites are skipped visibly, never silently.
 */
export function postgresReachable(): Promise<boolean> {
  reachable ??= admin((c) => c.query('SELECT 1')).then(
    () => true,
    () => {
      console.warn(
        `PostgreSQL at ${serverName()} is not reachable: PostgreSQL suites skipped (point SVC_TEST_DATABASE_URL at a server to run them)`,
      );
      return false;
    },
  );
  return reachable;
}

export interface TestDatabase {
  /** The URL of the new database (the admin URL's server and credentials). */
  url: string;
  name: string;
  /** Drops the database, ending sessions still open on it. */
  drop(): Promise<void>;
}

/** A new, empty database with a name no other test run uses. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `svc_test_${process.pid}_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8'`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** Empties every table of the database but the record of applied migrations. */
export async function truncateAll(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ tablename: string }>(
      "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'",
    );
    if (rows.length > 0)
      await client.query(`TRUNCATE ${rows.map((r) => `"${r.tablename}"`).join(', ')} RESTART IDENTITY`);
  } finally {
    await client.end();
  }
}

/**
 * The storage the suites that start a control plane give it: LMDB in its data directory, or
 * under SVC_TEST_STORAGE=postgres a fresh PostgreSQL database of its own (`npm run test:postgres`).
 */
export const TEST_STORAGE: 'lmdb' | 'postgres' = process.env.SVC_TEST_STORAGE === 'postgres' ? 'postgres' : 'lmdb';

/** Connections per control plane under test: several run at once on one small server. */
const TEST_POOL_SIZE = 4;

export interface ControlPlaneDatabase {
  /** The config a control plane on it takes (`SVC_DATABASE_URL`, `SVC_DATABASE_POOL_SIZE`). */
  config: { database_url: string; database_pool_size: number };
  env: { SVC_DATABASE_URL: string; SVC_DATABASE_POOL_SIZE: string };
  url: string;
  drop(): Promise<void>;
}

const databases = new Set<ControlPlaneDatabase>();

/**
 * A fresh database for a control plane under test when the suites run on PostgreSQL, else null
 * (LMDB). Asked for PostgreSQL and not finding it is a failure, not a skip.
 */
export async function controlPlaneDatabase(): Promise<ControlPlaneDatabase | null> {
  if (TEST_STORAGE !== 'postgres') return null;
  if (!(await postgresReachable()))
    throw new Error(`SVC_TEST_STORAGE=postgres, but PostgreSQL at ${serverName()} is not reachable`);
  const database = await createTestDatabase();
  const entry: ControlPlaneDatabase = {
    config: { database_url: database.url, database_pool_size: TEST_POOL_SIZE },
    env: { SVC_DATABASE_URL: database.url, SVC_DATABASE_POOL_SIZE: String(TEST_POOL_SIZE) },
    url: database.url,
    drop: async () => {
      databases.delete(entry);
      await database.drop();
    },
  };
  databases.add(entry);
  return entry;
}

/** Drops every database `controlPlaneDatabase` made in this process and not dropped yet. */
export async function dropControlPlaneDatabases(): Promise<void> {
  for (const database of [...databases]) await database.drop();
}
