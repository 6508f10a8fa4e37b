import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import { openProxyStore } from './open-store.ts';
import { ProvisionalEvents } from './provisional-events.ts';

const event = (i: number): OutboxEvent => ({ id: `e-${i}`, subject: 'svc.t.events.llm.call', data: { i } });
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("the proxy's LMDB store, its outbox and its provisional events", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'proxy-store-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('makes its environment readable by its user only, with or without an fsync interval', async () => {
    const mode = (path: string) => statSync(path).mode & 0o777;
    for (const interval of [0, 100]) {
      const dataDir = join(dir, `data-${interval}`);
      await openProxyStore(dataDir, interval).close();
      const env = join(dataDir, 'proxy');
      expect([dataDir, env, join(env, 'data.mdb'), join(env, 'lock.mdb')].map(mode)).toEqual([
        0o700, 0o700, 0o600, 0o600,
      ]);
    }
  });

  it('with an fsync interval, commits an append on the calling thread at the end of its turn', async () => {
    const store = openProxyStore(dir, 100);
    expect(store.synced).toBe(false);
    const outbox = new LmdbOutboxStorage(store);
    const db = store.root.openDB({ name: 'outbox', encoding: 'msgpack' });
    const appended = outbox.append([event(1)]);
    await nextTurn();
    expect(db.getCount()).toBe(1);
    await appended;
    await outbox.close();
    await store.close();
  });

  it('with an interval of 0, leaves each commit and its flush to LMDB, and an append resolves once it is on disk', async () => {
    const store = openProxyStore(dir, 0);
    expect(store.synced).toBe(true);
    const outbox = new LmdbOutboxStorage(store);
    const db = store.root.openDB({ name: 'outbox', encoding: 'msgpack' });
    const appended = outbox.append([event(1), event(2)]);
    await nextTurn();
    // Not committed on this thread: LMDB's writer has it.
    expect(db.getCount()).toBe(0);
    await appended;
    expect(db.getCount()).toBe(2);
    await outbox.close();
    await store.close();

    const reopened = openProxyStore(dir, 0);
    const again = new LmdbOutboxStorage(reopened);
    const claim = await again.claim(10);
    expect(claim.entries.map((e) => e.event.id)).toEqual(['e-1', 'e-2']);
    await claim.settle(claim.entries.map((e) => e.key));
    expect(await again.depth()).toEqual({ entries: 0, bytes: 0 });
    await again.close();
    await reopened.close();
  });

  it('with an fsync interval, has a provisional event committed once its put returns, before any other turn', async () => {
    const store = openProxyStore(dir, 100);
    const events = new ProvisionalEvents(store);
    const put = events.put(event(1));
    // In the page cache now: a process killed from here on keeps it.
    expect(events.all()).toEqual([event(1)]);
    await put;
    await store.close();
  });

  for (const interval of [0, 100])
    it(`keeps provisional events across a restart, by event id, with an fsync interval of ${interval}`, async () => {
      const store = openProxyStore(dir, interval);
      const events = new ProvisionalEvents(store);
      await events.put(event(1));
      await events.put(event(2));
      await events.put({ ...event(2), data: { i: 3 } });
      await events.remove('e-1');
      await store.close();

      const reopened = openProxyStore(dir, interval);
      expect(new ProvisionalEvents(reopened).all()).toEqual([{ ...event(2), data: { i: 3 } }]);
      await reopened.close();
    });
});
