import { open, type Database, type RootDatabase } from 'lmdb';
import type { OutboxEntry, OutboxEvent, OutboxStorage } from './outbox-storage.ts';

const DB_NAME = 'outbox';

/**
 * The outbox in an LMDB environment, database `outbox`, keyed by a sequence continued across
 * restarts. Given the process's open root (the proxy's cache, the control plane's store), its
 * transactional appends share that environment's write transactions; given a path, it opens
 * (and on close, closes) an environment of its own.
 */
export class LmdbOutboxStorage implements OutboxStorage {
  readonly #root: RootDatabase;
  readonly #ownsRoot: boolean;
  readonly #db: Database<OutboxEvent, number>;
  #nextKey: number;

  constructor(store: { root: RootDatabase } | { path: string }) {
    this.#ownsRoot = 'path' in store;
    this.#root = 'path' in store ? open({ path: store.path }) : store.root;
    this.#db = this.#root.openDB<OutboxEvent, number>({ name: DB_NAME, encoding: 'msgpack' });
    const [last] = [...this.#db.getKeys({ reverse: true, limit: 1 })];
    this.#nextKey = (last ?? 0) + 1;
  }

  stored(): OutboxEntry[] {
    return [...this.#db.getRange()].map(({ key, value }) => ({ key, event: value }));
  }

  async append(events: readonly OutboxEvent[]): Promise<void> {
    // Keys are taken now, in call order; LMDB commits the puts in that order.
    await Promise.all(events.map((event) => this.#db.put(this.#nextKey++, event)));
  }

  appendInTransaction(events: readonly OutboxEvent[]): void {
    // Synchronous commits happen in call order too, so key order stays commit order.
    for (const event of events) this.#db.putSync(this.#nextKey++, event);
  }

  next(afterKey: number): OutboxEntry | undefined {
    const [entry] = [...this.#db.getRange({ start: afterKey + 1, limit: 1 })];
    return entry && { key: entry.key, event: entry.value };
  }

  async remove(key: number): Promise<void> {
    await this.#db.remove(key);
  }

  async close(): Promise<void> {
    if (this.#ownsRoot) await this.#root.close();
  }
}
