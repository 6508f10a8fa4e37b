import { open, type Database, type RootDatabase } from 'lmdb';
import {
  eventSize,
  type OutboxClaim,
  type OutboxDepth,
  type OutboxEntry,
  type OutboxEvent,
  type OutboxStorage,
} from './outbox-storage.ts';

const DB_NAME = 'outbox';

/**
 * The outbox in an LMDB environment, database `outbox`, keyed by a sequence continued across
 * restarts. Given the process's open root (the proxy's cache, the control plane's storage), its
 * transactional appends share that environment's write transactions; given a path, it opens
 * (and on close, closes) an environment of its own. One process owns an environment, so the
 * depth is counted here in memory (from a scan at open) and claims are tracked here too.
 */
export class LmdbOutboxStorage implements OutboxStorage {
  readonly #root: RootDatabase;
  readonly #ownsRoot: boolean;
  readonly #db: Database<OutboxEvent, number>;
  readonly #depth: OutboxDepth = { entries: 0, bytes: 0 };
  /** Keys handed to a claim that has not settled yet. */
  readonly #claimed = new Set<number>();
  #nextKey: number;

  constructor(store: { root: RootDatabase } | { path: string }) {
    this.#ownsRoot = 'path' in store;
    this.#root = 'path' in store ? open({ path: store.path }) : store.root;
    this.#db = this.#root.openDB<OutboxEvent, number>({ name: DB_NAME, encoding: 'msgpack' });
    let last = 0;
    for (const { key, value } of this.#db.getRange()) {
      this.#count(value, 1);
      last = key;
    }
    this.#nextKey = last + 1;
  }

  depth(): Promise<OutboxDepth> {
    return Promise.resolve({ ...this.#depth });
  }

  async append(events: readonly OutboxEvent[]): Promise<void> {
    // Keys are taken now, in call order, and LMDB commits the puts in that order. Counted before
    // they land, so that the depth bounds concurrent appends.
    for (const event of events) this.#count(event, 1);
    try {
      await Promise.all(events.map((event) => this.#db.put(this.#nextKey++, event)));
    } catch (error) {
      for (const event of events) this.#count(event, -1);
      throw error;
    }
  }

  /**
   * Writes events inside the caller's open synchronous transaction, so they commit or roll back
   * with the change they announce; call what it returns once that transaction committed.
   */
  appendInTransaction(events: readonly OutboxEvent[]): () => void {
    // Synchronous commits happen in call order too, so key order stays commit order.
    for (const event of events) this.#db.putSync(this.#nextKey++, event);
    return () => {
      for (const event of events) this.#count(event, 1);
    };
  }

  claim(limit: number): Promise<OutboxClaim> {
    const entries: OutboxEntry[] = [];
    for (const { key, value } of this.#db.getRange()) {
      if (entries.length >= limit) break;
      if (this.#claimed.has(key)) continue;
      entries.push({ key, event: value });
    }
    for (const { key } of entries) this.#claimed.add(key);
    return Promise.resolve({ entries, settle: (done) => this.#settle(entries, done) });
  }

  async close(): Promise<void> {
    if (this.#ownsRoot) await this.#root.close();
  }

  async #settle(entries: readonly OutboxEntry[], done: readonly number[]): Promise<void> {
    const removed = new Set(done);
    try {
      // One LMDB commit for all of them: LMDB batches the removals.
      await Promise.all(done.map((key) => this.#db.remove(key)));
      for (const entry of entries) if (removed.has(entry.key)) this.#count(entry.event, -1);
    } finally {
      for (const entry of entries) this.#claimed.delete(entry.key);
    }
  }

  #count(event: OutboxEvent, sign: 1 | -1): void {
    this.#depth.entries += sign;
    this.#depth.bytes += sign * eventSize(event);
  }
}
