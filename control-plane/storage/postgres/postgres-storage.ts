import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { SvcError } from '../../../core/errors/index.ts';
import type { Readers, Repositories, Storage } from '../storage.ts';
import { loadMigrations, migrate, type SqlMigration } from './migrate.ts';
import { PgOutboxStorage } from './outbox.ts';
import { readers, transactionRepositories } from './repositories.ts';
import { refusingNul } from './sql.ts';

export interface PostgresStorageOptions {
  /** `postgres://…`: holds a password, so it is never logged nor put in an error. */
  connectionString: string;
  /** Connections per process (`database_pool_size`). */
  poolSize: number;
  /** Told why a health check or an idle connection failed (the answers say only "not reachable"). */
  onError?: (error: unknown) => void;
  /** The migrations to apply (default: the SQL files shipped with the build). */
  migrations?: readonly SqlMigration[];
}

/** Serialization failure and deadlock: the transaction lost a race and may run again. */
const RETRYABLE = new Set(['40001', '40P01']);
const MAX_ATTEMPTS = 5;
/** How long a health check waits for the server before it answers "down". */
const HEALTH_TIMEOUT_MS = 3000;
const CONNECT_TIMEOUT_MS = 10_000;
/** Connections beside the pool, for health checks and the outbox depth. */
const SIDE_POOL_SIZE = 1;

function sqlState(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string'
    ? error.code
    : undefined;
}

interface Scope {
  open: boolean;
}

/**
 * The PostgreSQL backend: the shared store of N stateless control-plane replicas. Transactions
 * run on one pooled connection (READ COMMITTED); counters change in single statements, so
 * concurrent replicas lose no update; a transaction that loses a deadlock runs again (bounded).
 */
export class PostgresStorage implements Storage {
  readonly backend = 'postgres' as const;
  readonly read: Readers;
  readonly outbox: PgOutboxStorage;
  readonly #pool: pg.Pool;
  /** Health checks and the outbox depth: answered while every connection of `#pool` is busy. */
  readonly #side: pg.Pool;
  readonly #scope = new AsyncLocalStorage<Scope>();
  readonly #onError: (error: unknown) => void;
  #closed = false;

  private constructor(pool: pg.Pool, side: pg.Pool, onError: (error: unknown) => void) {
    this.#pool = pool;
    this.#side = side;
    this.#onError = onError;
    this.read = readers(pool);
    this.outbox = new PgOutboxStorage(pool, side, onError);
  }

  /** Connects and brings the database to the newest schema; `applied` lists what this start applied. */
  static async open(options: PostgresStorageOptions): Promise<{ storage: PostgresStorage; applied: number[] }> {
    const onError = options.onError ?? (() => undefined);
    const connect = (max: number) => {
      const created = new pg.Pool({
        connectionString: options.connectionString,
        max,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
        idleTimeoutMillis: 30_000,
        application_name: 'svc-control-plane',
      });
      // An idle connection the server dropped is reported here; unheard, it would end the process.
      created.on('error', onError);
      return created;
    };
    const storage = new PostgresStorage(connect(options.poolSize), connect(SIDE_POOL_SIZE), onError);
    try {
      const applied = await migrate(storage.#pool, options.migrations ?? (await loadMigrations()));
      return { storage, applied };
    } catch (error) {
      await storage.close();
      throw error;
    }
  }

  async withTransaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<T> {
    if (this.#scope.getStore()?.open === true)
      throw new Error('storage transactions do not nest: pass the open transaction on instead');
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#attempt(fn);
      } catch (error) {
        const state = sqlState(error);
        if (state === undefined || !RETRYABLE.has(state) || attempt >= MAX_ATTEMPTS) throw error;
        // Jittered, so that the transactions that deadlocked do not meet again at once.
        await sleep(Math.random() * 10 * attempt);
      }
    }
  }

  async #attempt<T>(fn: (tx: Repositories) => Promise<T>): Promise<T> {
    if (this.#closed) throw new SvcError('SVC-SYS-9001', 'storage is closed');
    const client = await this.#pool.connect();
    const onError = (error: unknown) => this.#onError(error);
    client.on('error', onError);
    const scope: Scope = { open: true };
    let broken = false;
    try {
      await client.query('BEGIN');
      const tx = transactionRepositories(client);
      const result = await this.#scope.run(scope, () => fn(tx.repositories));
      scope.open = false;
      await tx.audit.seal(refusingNul(client));
      const commit = await client.query('COMMIT');
      // A statement failed and the caller went on: PostgreSQL ended the transaction with a rollback.
      if (commit.command !== 'COMMIT') throw new Error('storage transaction rolled back: a statement in it failed');
      if (tx.outbox.appended) this.outbox.changed();
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw error;
    } finally {
      scope.open = false;
      client.off('error', onError);
      client.release(broken);
    }
  }

  async health(): Promise<{ status: 'ok' | 'down'; detail?: string }> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.#side.query('SELECT 1'),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('database did not answer in time')), HEALTH_TIMEOUT_MS);
        }),
      ]);
      return { status: 'ok' };
    } catch (error) {
      this.#onError(error);
      return { status: 'down', detail: 'storage not reachable' };
    } finally {
      clearTimeout(timer);
    }
  }

  async schemaVersion(): Promise<number> {
    const { rows } = await this.#side.query<{ version: number | null }>(
      'SELECT max(version) AS version FROM schema_migrations',
    );
    return rows[0]?.version ?? 0;
  }

  /** Waits for the connections in use to come back, then closes them all. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([this.#pool.end(), this.#side.end()]);
  }
}
