import { open, type Database, type RootDatabase } from 'lmdb';
import {
  eventFromJson,
  eventJson,
  eventSize,
  type OutboxClaim,
  type OutboxDepth,
  type OutboxEntry,
  type OutboxEvent,
  type OutboxStorage,
} from './outbox-storage.ts';
import { asError } from '../errors/index.ts';
import { commitFailure } from './lmdb-commit-failure.ts';

const DB_NAME = 'outbox';

/**
 * What an entry of the database holds: the event's JSON text (msgpack of a string: a copy, where
 * the event's object took an encoder's walk), or, written before that, the event's object itself.
 */
type StoredEvent = string | OutboxEvent;

/** An entry read back, in either form (entries of an earlier version are read after an upgrade). */
function storedEvent(value: StoredEvent): OutboxEvent {
  return typeof value === 'string' ? eventFromJson(value) : value;
}
/**
 * Events appended here kept in memory until the bus took them, so that the publisher does not
 * decode what it just encoded; past this many (the bus away), the rest are read back from LMDB.
 */
const RECENT_LIMIT = 1024;

/** What one write transaction of the outbox carries: the turn's appends and settled removals. */
interface Group {
  entries: OutboxEntry[];
  /** Keys that claims settled as taken by the bus. */
  removals: number[];
  /** Settled once the appends are on disk (in a synced environment, flushed). */
  done: PromiseWithResolvers<void>;
  /** Settled once the transaction committed: a removal need not wait for the flush. */
  committed: PromiseWithResolvers<void>;
}

/** A promise nobody need await: a failure is seen by whoever does, and is no unhandled rejection. */
function handled(): PromiseWithResolvers<void> {
  const settled = Promise.withResolvers<void>();
  settled.promise.catch(() => undefined);
  return settled;
}

function newGroup(): Group {
  return { entries: [], removals: [], done: handled(), committed: handled() };
}

/**
 * The outbox in an LMDB environment, database `outbox`, keyed by a sequence continued across
 * restarts. Given the process's open root (the proxy's cache, the control plane's storage), its
 * transactional appends share that environment's write transactions; given a path, it opens
 * (and on close, closes) an environment of its own. One process owns an environment, so the
 * depth is counted here in memory (from a scan at open) and claims are tracked here too.
 *
 * `synced` says whether each commit of the environment waits for the disk (the control plane's
 * storage, an environment opened here, a proxy with an fsync interval of 0). Its own commits are
 * then left to LMDB's writer thread: a synchronous one would hold the event loop, and every
 * request on it, through a flush.
 */
export class LmdbOutboxStorage implements OutboxStorage {
  readonly #root: RootDatabase;
  readonly #ownsRoot: boolean;
  readonly #db: Database<StoredEvent, number>;
  readonly #depth: OutboxDepth = { entries: 0, bytes: 0 };
  /** The size of each held event by key, so that removing one does not encode it again. */
  readonly #sizes = new Map<number, number>();
  /**
   * Keys removed before they were counted: a claim may settle a transactional append's events
   * before its caller counts them (`appendInTransaction`), and the count must still come out even.
   */
  readonly #removedEarly = new Set<number>();
  /** Events appended by this process and not yet removed, by key, at most RECENT_LIMIT. */
  readonly #recent = new Map<number, OutboxEvent>();
  /** Keys handed to a claim that has not settled yet. */
  readonly #claimed = new Set<number>();
  readonly #synced: boolean;
  /** Asynchronous commits not yet done, which `close` waits for. */
  readonly #writing = new Set<Promise<void>>();
  #nextKey: number;
  /** Appends waiting for the next commit. */
  #group: Group | null = null;
  #groupCommits = 0;

  constructor(store: { root: RootDatabase; synced: boolean } | { path: string }) {
    this.#ownsRoot = 'path' in store;
    this.#root = 'path' in store ? open({ path: store.path }) : store.root;
    this.#synced = 'path' in store || store.synced;
    this.#db = this.#root.openDB<StoredEvent, number>({ name: DB_NAME, encoding: 'msgpack' });
    let last = 0;
    for (const { key, value } of this.#db.getRange()) {
      this.#add(key, storedEvent(value));
      last = key;
    }
    this.#nextKey = last + 1;
  }

  depth(): Promise<OutboxDepth> {
    return Promise.resolve({ ...this.#depth });
  }

  /**
   * Group commit: the events appended in one turn of the event loop are written together, in one
   * LMDB transaction at the end of that turn, so under load many calls share a commit and none
   * pays for one of its own. In an environment that does not sync each commit, a synchronous
   * one: a lone commit is then a few tens of microseconds of this thread's time, where an
   * asynchronous one waits for LMDB's writer thread and back (about six times as long on a lone
   * call). Resolves once the events are on disk (in a synced environment, once flushed). Keys
   * are taken now, in call order, and groups commit in that order.
   */
  append(events: readonly OutboxEvent[]): Promise<void> {
    const group = this.#openGroup();
    for (const event of events) {
      const key = this.#nextKey++;
      // Counted before they land, so that the depth bounds concurrent appends.
      this.#add(key, event);
      // A claim sees only committed keys: an event kept before its commit is not handed out early.
      if (this.#recent.size < RECENT_LIMIT) this.#recent.set(key, event);
      group.entries.push({ key, event });
    }
    return group.done.promise;
  }

  /** The outbox's write transactions so far, appends and removals alike (the bench reports them). */
  get groupCommits(): number {
    return this.#groupCommits;
  }

  /** The group this turn's writes join, opened (to commit at the end of the turn) if none is. */
  #openGroup(): Group {
    if (this.#group === null) {
      this.#group = newGroup();
      setImmediate(() => this.#commitGroup());
    }
    return this.#group;
  }

  #commitGroup(): void {
    const group = this.#group;
    if (group === null) return;
    this.#group = null;
    this.#groupCommits++;
    const committed = this.#commit(() => {
      for (const { key, event } of group.entries) this.#db.putSync(key, eventJson(event));
      for (const key of group.removals) this.#db.removeSync(key);
    });
    const written =
      this.#synced && group.entries.length > 0
        ? this.#track(committed.then(async () => void (await this.#root.flushed)))
        : committed;
    committed.then(group.committed.resolve, group.committed.reject);
    written.then(
      () => group.done.resolve(),
      (error: unknown) => {
        for (const { key, event } of group.entries) {
          this.#remove(key, event);
          this.#recent.delete(key);
        }
        group.done.reject(asError(error));
      },
    );
  }

  /**
   * One write transaction: synchronous where commits do not wait for the disk, else on LMDB's
   * writer thread (after the writes queued before it).
   */
  #commit(write: () => void): Promise<void> {
    if (!this.#synced) {
      try {
        this.#root.transactionSync(write);
        return Promise.resolve();
      } catch (error) {
        return Promise.reject(asError(error));
      }
    }
    // A child transaction: a write failing part way leaves none of the others behind.
    return this.#track(
      this.#root.childTransaction(write).then(
        () => undefined,
        async (error: unknown) => Promise.reject(await commitFailure(error)),
      ),
    );
  }

  /** Keeps an asynchronous write in `#writing` until it is done, for `close` to wait for. */
  #track(write: Promise<void>): Promise<void> {
    this.#writing.add(write);
    const forget = () => this.#writing.delete(write);
    write.then(forget, forget);
    return write;
  }

  /**
   * Writes events inside the caller's open write transaction, so they commit or roll back with
   * the change they announce; call what it returns once that transaction committed.
   */
  appendInTransaction(events: readonly OutboxEvent[]): () => void {
    // The caller's transactions commit in call order too, so key order stays commit order.
    const keys = events.map((event) => {
      const key = this.#nextKey++;
      this.#db.putSync(key, eventJson(event));
      return key;
    });
    return () =>
      keys.forEach((key, i) => {
        const event = events[i] as OutboxEvent;
        // Kept only once committed (a failed commit calls nothing) and while not yet settled.
        if (this.#add(key, event) && this.#recent.size < RECENT_LIMIT) this.#recent.set(key, event);
      });
  }

  claim(limit: number): Promise<OutboxClaim> {
    const entries: OutboxEntry[] = [];
    for (const key of this.#db.getKeys()) {
      if (entries.length >= limit) break;
      if (this.#claimed.has(key)) continue;
      let event = this.#recent.get(key);
      if (event === undefined) {
        const stored = this.#db.get(key);
        if (stored === undefined) continue;
        event = storedEvent(stored);
      }
      entries.push({ key, event });
    }
    for (const { key } of entries) this.#claimed.add(key);
    return Promise.resolve({ entries, settle: (done) => this.#settle(entries, done) });
  }

  async close(): Promise<void> {
    // What was appended or settled this turn is written before the environment may close.
    this.#commitGroup();
    await Promise.allSettled([...this.#writing]);
    if (this.#ownsRoot) await this.#root.close();
  }

  /**
   * The removals join the turn's group, so that one write transaction carries the turn's appends
   * and removals (and where those commit synchronously, no asynchronous write stays in flight for
   * an append to wait behind). A removal need not reach the disk: one lost to a crash sends its
   * event again, which the bus de-duplicates; so it is done once committed, not flushed. The keys
   * stay claimed until the removal committed, so that no claim hands them out again meanwhile; a
   * commit that fails gives them back unremoved, to be sent again.
   */
  #settle(entries: readonly OutboxEntry[], done: readonly number[]): Promise<void> {
    const removed = new Set(done);
    let committed = Promise.resolve();
    // An idle publisher settles an empty claim every poll: nothing to remove is no transaction.
    if (done.length > 0) {
      const group = this.#openGroup();
      group.removals.push(...done);
      committed = group.committed.promise;
    }
    const settled = committed.then(() => {
      for (const { key, event } of entries) {
        if (!removed.has(key)) continue;
        this.#remove(key, event);
        this.#recent.delete(key);
      }
    });
    const release = () => {
      for (const entry of entries) this.#claimed.delete(entry.key);
    };
    settled.then(release, release);
    return settled;
  }

  /** Counts the event in; false when a claim already settled it (it is counted out already). */
  #add(key: number, event: OutboxEvent): boolean {
    const size = eventSize(event);
    this.#depth.entries++;
    this.#depth.bytes += size;
    if (this.#removedEarly.delete(key)) return false;
    this.#sizes.set(key, size);
    return true;
  }

  #remove(key: number, event: OutboxEvent): void {
    let size = this.#sizes.get(key);
    if (size === undefined) {
      size = eventSize(event);
      this.#removedEarly.add(key);
    }
    this.#sizes.delete(key);
    this.#depth.entries--;
    this.#depth.bytes -= size;
  }
}
