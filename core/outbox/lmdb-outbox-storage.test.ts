import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LmdbOutboxStorage } from './lmdb-outbox-storage.ts';
import { eventSize, type OutboxEvent } from './outbox-storage.ts';
import { refusingWrites } from '../../test/harness/refusing-lmdb.ts';

const event = (i: number): OutboxEvent => ({ id: `e-${i}`, subject: 'svc.t.events.llm.call', data: { i } });

describe('LMDB outbox storage group commit', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-outbox-group-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes many concurrent appends in a few commits, every one in call order, all there after a reopen', async () => {
    const storage = new LmdbOutboxStorage({ path: dir });
    const appends: Promise<void>[] = [];
    // Appends arrive over several turns, as calls finish at different moments.
    for (let i = 0; i < 1000; i++) {
      appends.push(storage.append([event(i)]));
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(appends);
    expect(storage.groupCommits).toBeLessThan(100);
    expect(storage.groupCommits).toBeGreaterThan(0);
    expect((await storage.depth()).entries).toBe(1000);
    // Claimed in the same process (from the events kept in memory), then after a reopen (from disk).
    const same = await storage.claim(2000);
    expect(same.entries.map((e) => e.event.id)).toEqual(Array.from({ length: 1000 }, (_, i) => `e-${i}`));
    await same.settle([]);
    await storage.close();

    const reopened = new LmdbOutboxStorage({ path: dir });
    const claim = await reopened.claim(2000);
    expect(claim.entries.map((e) => e.event.id)).toEqual(Array.from({ length: 1000 }, (_, i) => `e-${i}`));
    await claim.settle([]);
    await reopened.close();
  });

  it('where each commit waits for the disk, keeps none of a commit group one of whose events cannot be written', async () => {
    const root = open({ path: dir });
    // LMDB refuses one event's write at commit, as a full map would.
    const storage = refusingWrites(root, 'e-bad', () => new LmdbOutboxStorage({ root, synced: true }));
    const unwritable: OutboxEvent = { id: 'e-bad', subject: 'svc.t.events.llm.call', data: {} };
    const settled = await Promise.allSettled([storage.append([event(1)]), storage.append([unwritable])]);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected']);
    expect(await storage.depth()).toEqual({ entries: 0, bytes: 0 });
    await storage.append([event(2)]);
    await storage.close();
    const reopened = new LmdbOutboxStorage({ root, synced: true });
    const claim = await reopened.claim(10);
    expect(claim.entries.map((e) => e.event.id)).toEqual(['e-2']);
    await claim.settle([]);
    await root.close();
  });

  it('a lone append commits at once, without waiting for company', async () => {
    const storage = new LmdbOutboxStorage({ path: dir });
    await storage.append([event(1)]);
    await storage.append([event(2)]);
    expect(storage.groupCommits).toBe(2);
    expect((await storage.depth()).entries).toBe(2);
    await storage.close();
  });

  it('hands out, in order, more events than it keeps in memory, and none that is settled', async () => {
    const storage = new LmdbOutboxStorage({ path: dir });
    await Promise.all(Array.from({ length: 3000 }, (_, i) => storage.append([event(i)])));
    const first = await storage.claim(5000);
    expect(first.entries.map((e) => e.event)).toEqual(Array.from({ length: 3000 }, (_, i) => event(i)));
    await first.settle(first.entries.slice(0, 2500).map((e) => e.key));
    await storage.append([event(3000)]);
    const rest = await storage.claim(5000);
    expect(rest.entries.map((e) => e.event.id)).toEqual([
      ...Array.from({ length: 500 }, (_, i) => `e-${2500 + i}`),
      'e-3000',
    ]);
    await rest.settle([]);
    await storage.close();
  });

  it('comes out even when a claim settles a transactional append before its caller counts it', async () => {
    const root = open({ path: dir });
    const storage = new LmdbOutboxStorage({ root, synced: true });
    let count = (): void => undefined;
    root.transactionSync(() => {
      count = storage.appendInTransaction([event(1), event(2)]);
    });
    const claim = await storage.claim(10);
    await claim.settle(claim.entries.map((e) => e.key));
    count();
    expect(await storage.depth()).toEqual({ entries: 0, bytes: 0 });
    await storage.append([event(3)]);
    expect(await storage.depth()).toEqual({ entries: 1, bytes: eventSize(event(3)) });
    await storage.close();
    await root.close();
  });

  it('hands out the events of a transactional append from memory once counted, without reading them back', async () => {
    const root = open({ path: dir });
    const openDb = root.openDB.bind(root);
    let reads = 0;
    const counting = vi.spyOn(root, 'openDB').mockImplementation((...args: Parameters<typeof openDb>) => {
      const db = openDb(...args);
      const get = db.get.bind(db);
      db.get = (key): unknown => {
        reads++;
        return get(key) as unknown;
      };
      return db;
    });
    const storage = new LmdbOutboxStorage({ root, synced: true });
    counting.mockRestore();
    const appended = [event(1), event(2)];
    let count = (): void => undefined;
    root.transactionSync(() => {
      count = storage.appendInTransaction(appended);
    });
    count();
    const claim = await storage.claim(10);
    expect(claim.entries.map((e) => e.event)).toEqual(appended);
    expect(reads).toBe(0);
    await claim.settle(claim.entries.map((e) => e.key));
    await storage.close();
    await root.close();
  });

  it('where each commit waits for the disk, removes a settled claim off the calling thread and hands none of it out meanwhile', async () => {
    const root = open({ path: dir });
    const db = root.openDB({ name: 'outbox', encoding: 'msgpack' });
    const storage = new LmdbOutboxStorage({ root, synced: true });
    await storage.append([event(1), event(2), event(3)]);
    const claim = await storage.claim(10);
    const settled = claim.settle([claim.entries[0]!.key, claim.entries[1]!.key]);
    // Nothing committed on this thread: the events are still in LMDB, and still claimed.
    expect(db.getCount()).toBe(3);
    expect((await storage.claim(10)).entries).toEqual([]);
    await settled;
    expect(db.getCount()).toBe(1);
    expect(await storage.depth()).toEqual({ entries: 1, bytes: eventSize(event(3)) });
    const again = await storage.claim(10);
    expect(again.entries.map((e) => e.event.id)).toEqual(['e-3']);
    await again.settle([]);
    await storage.close();
    await root.close();
  });

  it('settling a claim with nothing done writes no transaction, and gives its events back', async () => {
    const root = open({ path: dir, noSync: true });
    const storage = new LmdbOutboxStorage({ root, synced: false });
    await storage.append([event(1)]);
    let transactions = 0;
    const transactionSync = root.transactionSync.bind(root);
    root.transactionSync = ((write: () => unknown) => {
      transactions++;
      return transactionSync(write);
    }) as typeof root.transactionSync;
    const claim = await storage.claim(10);
    await claim.settle([]);
    expect(transactions).toBe(0);
    expect((await storage.claim(10)).entries.map((e) => e.event.id)).toEqual(['e-1']);
    await storage.close();
    await root.close();
  });

  it('counts the bytes it holds through appends, a reopen and settled claims', async () => {
    const sizes = [1, 2, 30].map((i) => eventSize(event(i)));
    const storage = new LmdbOutboxStorage({ path: dir });
    await storage.append([event(1), event(2)]);
    await storage.append([event(30)]);
    expect(await storage.depth()).toEqual({ entries: 3, bytes: sizes[0]! + sizes[1]! + sizes[2]! });
    await storage.close();

    const reopened = new LmdbOutboxStorage({ path: dir });
    expect(await reopened.depth()).toEqual({ entries: 3, bytes: sizes[0]! + sizes[1]! + sizes[2]! });
    const claim = await reopened.claim(10);
    // The first and last went to the bus; the second is given back.
    await claim.settle([claim.entries[0]!.key, claim.entries[2]!.key]);
    expect(await reopened.depth()).toEqual({ entries: 1, bytes: sizes[1]! });
    const again = await reopened.claim(10);
    expect(again.entries.map((e) => e.event.id)).toEqual(['e-2']);
    await again.settle([again.entries[0]!.key]);
    expect(await reopened.depth()).toEqual({ entries: 0, bytes: 0 });
    await reopened.close();
  });

  it('keeps each event as its JSON text, and after an upgrade still reads and sends the events an earlier version kept as objects', async () => {
    // An earlier version's entries: each event's object, encoded by msgpack.
    const earlier = open({ path: dir });
    const db = earlier.openDB<unknown, number>({ name: 'outbox', encoding: 'msgpack' });
    const nested = { id: 'e-old', subject: 'svc.t.events.llm.call', data: { usage: { input: 12 }, tags: ['a'] } };
    db.putSync(1, nested);
    db.putSync(2, event(2));
    await earlier.close();

    const storage = new LmdbOutboxStorage({ path: dir });
    expect(await storage.depth()).toEqual({ entries: 2, bytes: eventSize(nested) + eventSize(event(2)) });
    await storage.append([event(3)]);
    const claim = await storage.claim(10);
    expect(claim.entries.map((e) => e.key)).toEqual([1, 2, 3]);
    expect(claim.entries.map((e) => e.event)).toEqual([nested, event(2), event(3)]);
    await claim.settle([1]);
    await storage.close();

    const raw = open({ path: dir });
    const after = raw.openDB<unknown, number>({ name: 'outbox', encoding: 'msgpack' });
    expect(after.get(3)).toBe(JSON.stringify(event(3)));
    expect(after.get(1)).toBeUndefined();
    await raw.close();

    // Read back from disk, old and new alike, with the bytes they count for.
    const reopened = new LmdbOutboxStorage({ path: dir });
    expect(await reopened.depth()).toEqual({ entries: 2, bytes: eventSize(event(2)) + eventSize(event(3)) });
    const again = await reopened.claim(10);
    expect(again.entries.map((e) => e.event)).toEqual([event(2), event(3)]);
    await again.settle([2, 3]);
    expect(await reopened.depth()).toEqual({ entries: 0, bytes: 0 });
    await reopened.close();
  });
});
