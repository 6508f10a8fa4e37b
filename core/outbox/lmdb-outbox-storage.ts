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

interface Group {
  entries: OutboxEntry[];
  done: PromiseWithResolvers<void>;
}

function newGroup(): Group {
  const done = Promise.withResolvers<void>();
  // A caller that does not await (a failed write is counted and logged by the outbox) must not
  // leave an unhandled rejection behind.
  done.promise.catch(() => undefined);
  return { entries: [], done };
}

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
  /** Appends waiting for the next commit. */
  #group: Group | null = null;
  #committing: Promise<void> | null = null;
  #groupCommits = 0;

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

  /**
   * Group commit: events appended while a commit is under way wait for the next one, which
   * writes all of them in one LMDB transaction, so under load many calls share a commit and none
   * pays for one of its own. Keys are taken now, in call order, and groups commit in that order.
   */
  append(events: readonly OutboxEvent[]): Promise<void> {
    // Counted before they land, so that the depth bounds concurrent appends.
    for (const event of events) this.#count(event, 1);
    this.#group ??= newGroup();
    const group = this.#group;
    for (const event of events) group.entries.push({ key: this.#nextKey++, event });
    if (this.#committing === null) this.#commitNext();
    return group.done.promise;
  }

  /** Group commits so far (the bench reports events per commit). */
  get groupCommits(): number {
    return this.#groupCommits;
  }

  #commitNext(): void {
    const group = this.#group;
    if (group === null) return;
    this.#group = null;
    this.#groupCommits++;
    // One asynchronous LMDB transaction for the whole group.
    this.#committing = this.#db
      .transaction(() => {
        // Inside the transaction a put is applied at once; its own promise adds nothing.
        for (const { key, event } of group.entries) void this.#db.put(key, event);
      })
      .then(
        () => group.done.resolve(),
        (error: unknown) => {
          for (const { event } of group.entries) this.#count(event, -1);
          group.done.reject(error);
        },
      )
      .finally(() => {
        this.#committing = null;
        this.#commitNext();
      });
  }

  /**
   * Writes events inside the caller's open write transaction, so they commit or roll back with
   * the change they announce; call what it returns once that transaction committed.
   */
  appendInTransaction(events: readonly OutboxEvent[]): () => void {
    // The caller's transactions commit in call order too, so key order stays commit order.
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
