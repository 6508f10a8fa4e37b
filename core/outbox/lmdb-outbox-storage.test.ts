import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LmdbOutboxStorage } from './lmdb-outbox-storage.ts';
import type { OutboxEvent } from './outbox-storage.ts';

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
    await storage.close();

    const reopened = new LmdbOutboxStorage({ path: dir });
    const claim = await reopened.claim(2000);
    expect(claim.entries.map((e) => e.event.id)).toEqual(Array.from({ length: 1000 }, (_, i) => `e-${i}`));
    await claim.settle([]);
    await reopened.close();
  });

  it('a lone append commits at once, without waiting for company', async () => {
    const storage = new LmdbOutboxStorage({ path: dir });
    await storage.append([event(1)]);
    await storage.append([event(2)]);
    expect(storage.groupCommits).toBe(2);
    expect((await storage.depth()).entries).toBe(2);
    await storage.close();
  });
});
