import type { RootDatabase } from 'lmdb';
import { asError, SvcError } from '../../../core/errors/index.ts';
import { commitFailure } from '../../../core/outbox/lmdb-commit-failure.ts';
import type { LmdbOutboxStorage } from '../../../core/outbox/lmdb-outbox-storage.ts';
import type { OutboxEvent } from '../../../core/outbox/outbox-storage.ts';
import { COMMITTED, type KvView, type StagedView } from './kv.ts';

/** Transactions that ended while the commit before them was under way: written together. */
interface Group {
  /** The writes of every member, a later member's over an earlier one's. */
  view: StagedView;
  outbox: OutboxEvent[];
  done: PromiseWithResolvers<void>;
  /** Settled once the group is no longer open: taken to be written, or given up with the one before. */
  closed: PromiseWithResolvers<void>;
}

function newGroup(view: StagedView, outbox: readonly OutboxEvent[]): Group {
  const done = Promise.withResolvers<void>();
  // A group may fail with nobody waiting on it yet; its members see the rejection when they do.
  done.promise.catch(() => undefined);
  return { view, outbox: [...outbox], done, closed: Promise.withResolvers<void>() };
}

/**
 * Records an open group may hold before the next transaction waits for it to be taken to be
 * written. Without a bound, a writer that never yields to the event loop between its transactions
 * (the event processor draining a backlog over the in-process bus) kept every transaction's writes
 * in one group until the backlog ended: memory growing with the backlog, and none of it durable.
 * A transaction is never split: the one that passes the bound joins, the next one waits.
 */
export const MAX_OPEN_GROUP_RECORDS = 8_192;

/**
 * Group commit for the LMDB storage. Transactions still run one at a time (the storage's lock),
 * but a finished one does not hold the lock through its commit: its writes join the open group,
 * which the next transaction reads beneath its own writes, and the lock passes on. One group is
 * written at a time, in one LMDB write transaction; while it is written the next group fills. The
 * open group is sealed when LMDB's writer is ready for it, not when its write is asked for, so
 * what joins while the writer gets ready is written in the same commit. A
 * group's members are answered once LMDB reports the commit flushed to disk, so nothing is
 * answered before it is durable, and a group is never answered before the groups before it.
 *
 * A group whose commit fails rejects its members and every transaction that may have read its
 * writes: the open group, and any transaction under way when the failure was seen.
 */
export class GroupCommit {
  readonly #root: RootDatabase;
  readonly #outbox: LmdbOutboxStorage;
  /** Filling: transactions that ended after the group in flight was sealed. */
  #open: Group | null = null;
  /** Being written: not yet visible in LMDB. */
  #inFlight: Group | null = null;
  /** Whether a write transaction is asked for or under way. */
  #writing = false;
  #failures = 0;
  #lastFailure: Error | null = null;

  constructor(root: RootDatabase, outbox: LmdbOutboxStorage) {
    this.#root = root;
    this.#outbox = outbox;
  }

  /** What a transaction starting now reads beneath its own writes. */
  base(): KvView {
    return this.#open?.view ?? this.#inFlight?.view ?? COMMITTED;
  }

  /**
   * Resolves once a transaction may begin: at once, unless the open group holds
   * `MAX_OPEN_GROUP_RECORDS` or more, then once that group is taken to be written.
   */
  room(): Promise<void> {
    const open = this.#open;
    if (open === null || open.view.size < MAX_OPEN_GROUP_RECORDS) return Promise.resolve();
    return open.closed.promise;
  }

  /** A mark to pass to `join`: failures seen so far. */
  get failures(): number {
    return this.#failures;
  }

  /**
   * Adds a finished transaction (its view and outbox events); resolves once they are on disk. A
   * transaction that wrote nothing waits for the writes it may have read. `since` is `failures`
   * when the transaction began: a commit that failed after that may have been read, so the
   * transaction is refused.
   */
  join(view: StagedView, outbox: readonly OutboxEvent[], since: number): Promise<void> {
    if (this.#failures !== since) {
      return Promise.reject(
        new SvcError('SVC-SYS-9001', 'storage commit failed; the transaction read writes that were not kept', {
          cause: this.#lastFailure?.message ?? 'unknown',
        }),
      );
    }
    if (view.empty && outbox.length === 0) {
      const pending = this.#open ?? this.#inFlight;
      return pending === null ? Promise.resolve() : pending.done.promise;
    }
    if (this.#open === null) {
      // The first member's view becomes the group's; whatever it read beneath is in flight or in LMDB.
      view.base = this.#inFlight?.view ?? COMMITTED;
      this.#open = newGroup(view, outbox);
    } else {
      this.#open.view.absorb(view);
      this.#open.outbox.push(...outbox);
    }
    const done = this.#open.done.promise;
    if (!this.#writing) this.#writeNext();
    return done;
  }

  /** Resolves once every group has been written (or has failed). */
  async idle(): Promise<void> {
    while (this.#inFlight !== null || this.#open !== null) {
      await (this.#inFlight ?? this.#open)!.done.promise.catch(() => undefined);
    }
  }

  /** Asks LMDB for a write transaction for the open group; call only while none is asked for. */
  #writeNext(): void {
    this.#writing = true;
    let group: Group | undefined;
    let done: PromiseWithResolvers<void> | undefined;
    let counted = (): void => undefined;
    // A child transaction, so that a write failing part way leaves none of the group's behind.
    this.#root
      .childTransaction(() => {
        // Only `#writeNext` clears the open group, and it is not asked for twice at once.
        group = this.#open!;
        done = group.done;
        this.#open = null;
        group.closed.resolve();
        this.#inFlight = group;
        group.view.commit();
        if (group.outbox.length > 0) counted = this.#outbox.appendInTransaction(group.outbox);
      })
      .then(
        () => {
          // Visible in LMDB now: the next group reads it there.
          counted();
          this.#inFlight = null;
          // Its records are in LMDB: only its answer waits for the flush, not the records with it.
          group = undefined;
          this.#writing = false;
          if (this.#open !== null) {
            this.#open.view.base = COMMITTED;
            this.#writeNext();
          }
          const written = done!;
          // Flushes complete in commit order, so this one's answer never overtakes an earlier one's.
          return this.#root.flushed.then(() => written.resolve());
        },
        async (error: unknown) => {
          this.#failures++;
          this.#inFlight = null;
          this.#writing = false;
          // The open group was staged over the failed one's writes (or is the failed one, when
          // LMDB refused the transaction before it began).
          const dependent = this.#open;
          this.#open = null;
          dependent?.closed.resolve();
          const failure = await commitFailure(error);
          this.#lastFailure = failure;
          done?.reject(failure);
          dependent?.done.reject(failure);
        },
      )
      .catch((error: unknown) => done?.reject(asError(error)));
  }
}
