import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open, type RootDatabase } from 'lmdb';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LmdbOutboxStorage } from './lmdb-outbox-storage.ts';
import { eventSize, type OutboxEvent } from './outbox-storage.ts';
import { refusingWrites } from '../../test/harness/refusing-lmdb.ts';

const event = (i: number): OutboxEvent => ({ id: `e-${i}`, subject: 'svc.t.events.llm.call', data: { i } });

/** Counts the write transactions begun on `root` from now on, synchronous and asynchronous. */
function countTransactions(root: RootDatabase): () => number {
  let count = 0;
  const transactionSync = root.transactionSync.bind(root);
  const childTransaction = root.childTransaction.bind(root);
  root.transactionSync = ((write: () => unknown) => {
    count++;
    return transactionSync(write);
  }) as typeof root.transactionSync;
  root.childTransaction = ((write: () => unknown) => {
    count++;
    return childTransaction(write);
  }) as typeof root.childTransaction;
  return () => count;
}

describe.each([{ synced: false }, { synced: true }])('LMDB outbox removals (synced: $synced)', ({ synced }) => {
  let dir: string;
  let root: RootDatabase;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-outbox-removals-'));
    root = open({ path: dir, noSync: !synced });
  });
  afterEach(async () => {
    await root.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("removes what a claim settled in the same write transaction as the turn's appends", async () => {
    const storage = new LmdbOutboxStorage({ root, synced });
    await storage.append([event(1), event(2)]);
    const claim = await storage.claim(10);
    const transactions = countTransactions(root);
    const commits = storage.groupCommits;
    await Promise.all([claim.settle([claim.entries[0]!.key]), storage.append([event(3)])]);
    expect(transactions()).toBe(1);
    expect(storage.groupCommits).toBe(commits + 1);
    expect(await storage.depth()).toEqual({ entries: 2, bytes: eventSize(event(2)) + eventSize(event(3)) });
    const next = await storage.claim(10);
    expect(next.entries.map((e) => e.event.id)).toEqual(['e-2', 'e-3']);
    await next.settle([]);
    await storage.close();

    const reopened = new LmdbOutboxStorage({ root, synced });
    expect((await reopened.claim(10)).entries.map((e) => e.event.id)).toEqual(['e-2', 'e-3']);
    await reopened.close();
  });

  it('gives back unremoved the keys of a settle whose shared commit failed, and claims them again', async () => {
    const storage = refusingWrites(root, 'e-bad', () => new LmdbOutboxStorage({ root, synced }));
    await storage.append([event(1), event(2)]);
    const claim = await storage.claim(10);
    const unwritable: OutboxEvent = { id: 'e-bad', subject: 'svc.t.events.llm.call', data: {} };
    // The removal joins the append's transaction, which LMDB refuses: neither is kept.
    const outcomes = await Promise.allSettled([
      claim.settle(claim.entries.map((e) => e.key)),
      storage.append([unwritable]),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(await storage.depth()).toEqual({ entries: 2, bytes: eventSize(event(1)) + eventSize(event(2)) });

    const again = await storage.claim(10);
    expect(again.entries.map((e) => e.event.id)).toEqual(['e-1', 'e-2']);
    await again.settle(again.entries.map((e) => e.key));
    expect(await storage.depth()).toEqual({ entries: 0, bytes: 0 });
    await storage.close();

    const reopened = new LmdbOutboxStorage({ root, synced });
    expect(await reopened.depth()).toEqual({ entries: 0, bytes: 0 });
    expect((await reopened.claim(10)).entries).toEqual([]);
    await reopened.close();
  });

  it('writes the removals settled in its last turn when it closes', async () => {
    const storage = new LmdbOutboxStorage({ root, synced });
    await storage.append([event(1), event(2)]);
    const claim = await storage.claim(10);
    const settled = claim.settle([claim.entries[0]!.key]);
    await storage.close();
    await settled;

    const reopened = new LmdbOutboxStorage({ root, synced });
    expect((await reopened.claim(10)).entries.map((e) => e.event.id)).toEqual(['e-2']);
    await reopened.close();
  });
});
