import { AsyncLocalStorage } from 'node:async_hooks';
import { resolve } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { asError, SvcError } from '../../../core/errors/index.ts';
import { openPrivateEnv } from '../../../core/lmdb/open-private-env.ts';
import { LmdbOutboxStorage } from '../../../core/outbox/lmdb-outbox-storage.ts';
import type { Readers, Repositories, Storage } from '../storage.ts';
import { AsyncLock } from './async-lock.ts';
import { GroupCommit } from './group-commit.ts';
import { JobLeases } from './jobs.ts';
import { CommittedView, StagedView } from './kv.ts';
import { Layout, type Key } from './layout.ts';
import { MIGRATIONS, type Migration } from './migrations.ts';
import { RECORD_ENCODING } from './record-encoding.ts';
import { recordRepositories, transactionRepositories } from './repositories.ts';

export interface LmdbStorageOptions {
  /** The environment's directory (`<data_dir>/control-plane`). */
  path: string;
  /** Told why a health check failed (the check itself answers only "not readable"). */
  onCheckFailure?: (error: unknown) => void;
  migrations?: readonly Migration[];
}

/**
 * Environments open in this process. A second storage on one environment would hold a lock and
 * outbox sequence of its own beside the first, so it is refused.
 */
const openPaths = new Set<string>();

/** A transaction that has ended: its result, and its commit, which resolves once durable. */
interface Ended<T> {
  result: T;
  durable: Promise<void>;
}

/**
 * The result, once the commit is durable. Awaited in a frame of its own: a suspended async
 * function keeps all its locals, and the transaction's (its staged view, its repositories, the
 * function it ran and all that holds) are garbage once it has ended.
 */
async function untilDurable<T>(transaction: Promise<Ended<T>>): Promise<T> {
  const { result, durable } = await transaction;
  await durable;
  return result;
}

/** Marks the transaction an async context runs in, so that a nested one is refused, not deadlocked. */
interface Scope {
  open: boolean;
}

/**
 * The LMDB backend: the embedded default, one process. Transactions run one at a time under an
 * async lock; a transaction's writes are staged in memory (its reads see them), so a throw
 * anywhere leaves nothing behind and a record changed many times in a batch is written once.
 * Transactions that end while a commit is under way are written together in the next one (group
 * commit), each answered once its commit is flushed to disk. Reads outside transactions read
 * LMDB's committed state directly.
 */
export class LmdbStorage implements Storage {
  readonly backend = 'lmdb' as const;
  readonly read: Readers;
  readonly outbox: LmdbOutboxStorage;
  readonly #root: RootDatabase;
  readonly #layout: Layout;
  readonly #lock = new AsyncLock();
  readonly #groups: GroupCommit;
  readonly #jobs = new JobLeases();
  readonly #scope = new AsyncLocalStorage<Scope>();
  readonly #onCheckFailure: (error: unknown) => void;
  readonly #path: string;
  #closed = false;

  private constructor(root: RootDatabase, path: string, options: LmdbStorageOptions) {
    this.#root = root;
    this.#path = path;
    this.#layout = new Layout(root);
    this.read = recordRepositories(new CommittedView(), this.#layout);
    this.outbox = new LmdbOutboxStorage({ root, synced: true });
    this.#groups = new GroupCommit(root, this.outbox);
    this.#onCheckFailure = options.onCheckFailure ?? (() => undefined);
  }

  /**
   * Opens (creating) the environment and brings it to the newest schema version by the numbered
   * migrations; `applied` lists the versions this start applied.
   */
  static async open(options: LmdbStorageOptions): Promise<{ storage: LmdbStorage; applied: number[] }> {
    const path = resolve(options.path);
    if (openPaths.has(path)) throw new Error(`LMDB storage ${path} is open already in this process`);
    const root = openPrivateEnv({ path, maxDbs: 8, compression: false, ...RECORD_ENCODING });
    openPaths.add(path);
    const storage = new LmdbStorage(root, path, options);
    try {
      return { storage, applied: storage.#migrate(options.migrations ?? MIGRATIONS) };
    } catch (error) {
      await storage.close();
      throw error;
    }
  }

  withTransaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<T> {
    return untilDurable(this.#transaction(fn));
  }

  /** Runs the transaction; resolves, once it has ended, with its result and its commit's durability. */
  async #transaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<Ended<T>> {
    if (this.#scope.getStore()?.open === true)
      throw new Error('storage transactions do not nest: pass the open transaction on instead');
    const release = await this.#lock.acquire();
    const scope: Scope = { open: true };
    try {
      if (this.#closed) throw new SvcError('SVC-SYS-9001', 'storage is closed');
      await this.#groups.room();
      const since = this.#groups.failures;
      const kv = new StagedView(this.#groups.base());
      const tx = transactionRepositories(kv, this.#layout, this.#jobs);
      const result = await this.#scope.run(scope, () => fn(tx.repositories));
      const durable = this.#groups.join(kv, tx.outbox.events, since);
      tx.jobs.commit();
      return { result, durable };
    } finally {
      scope.open = false;
      release();
    }
  }

  async health(): Promise<{ status: 'ok' | 'down'; detail?: string }> {
    try {
      await this.schemaVersion();
      return { status: 'ok' };
    } catch (error) {
      this.#onCheckFailure(error);
      return { status: 'down', detail: 'storage not readable' };
    }
  }

  schemaVersion(): Promise<number> {
    try {
      return Promise.resolve(this.#storedVersion());
    } catch (error) {
      return Promise.reject(asError(error));
    }
  }

  /** Waits for the transaction under way, then closes the environment. */
  async close(): Promise<void> {
    if (this.#closed) return;
    const release = await this.#lock.acquire();
    try {
      this.#closed = true;
      await this.#groups.idle();
      await this.outbox.close();
      await this.#root.close();
    } finally {
      openPaths.delete(this.#path);
      release();
    }
  }

  #storedVersion(): number {
    return new CommittedView().get<number>(this.#layout.globalKind('meta'), 'schema_version') ?? 0;
  }

  #migrate(migrations: readonly Migration[]): number[] {
    const newest = Math.max(0, ...migrations.map((m) => m.version));
    const stored = this.#storedVersion();
    if (stored > newest) {
      throw new SvcError(
        'SVC-SYS-9001',
        `storage schema version ${stored} is newer than this build knows (${newest}); run a build at least as new`,
        { schema_version: stored, supported: newest },
      );
    }
    const applied: number[] = [];
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (migration.version <= this.#storedVersion()) continue;
      let from: Key | undefined;
      do {
        const kv = new StagedView();
        from = migration.up(kv, this.#layout, from);
        if (from === undefined) kv.put(this.#layout.globalKind('meta'), 'schema_version', migration.version);
        this.#root.transactionSync(() => kv.commit());
      } while (from !== undefined);
      applied.push(migration.version);
    }
    return applied;
  }
}
