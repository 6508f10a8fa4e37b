import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { openPrivateEnv } from '../../core/lmdb/open-private-env.ts';

export interface ProxyStore {
  readonly root: RootDatabase;
  /** Whether each commit waits for the disk (an fsync interval of 0). */
  readonly synced: boolean;
  /** Flushes once more and closes the environment. */
  close(): Promise<void>;
}

/** lmdb-js has `sync` (mdb_env_sync) on the root database but leaves it out of its typings. */
type Flushable = RootDatabase & { sync(done: (error?: Error) => void): void };

function flush(root: RootDatabase): Promise<void> {
  return new Promise((resolve) => {
    // A failed flush is retried at the next interval; the data stays in the page cache meanwhile.
    (root as Flushable).sync(() => resolve());
  });
}

/**
 * Opens the proxy's LMDB environment (`<data_dir>/proxy`: outbox, ruleset cache). With an fsync
 * interval, commits are not flushed one by one: a commit lands in the page cache, which a killed
 * process does not lose, and a timer flushes the environment every `fsyncIntervalMs`, so a machine
 * crash loses at most that interval. Interval 0 keeps LMDB's flush after every commit (overlapping
 * the next one), for deployments that want each commit durable at the price of throughput.
 */
export function openProxyStore(dataDir: string, fsyncIntervalMs: number): ProxyStore {
  const path = join(dataDir, 'proxy');
  if (fsyncIntervalMs === 0) {
    const root = openPrivateEnv({ path });
    return { root, synced: true, close: () => root.close() };
  }
  const root = openPrivateEnv({ path, noSync: true, overlappingSync: false });
  let flushing: Promise<void> | null = null;
  const timer = setInterval(() => {
    flushing ??= flush(root).finally(() => (flushing = null));
  }, fsyncIntervalMs).unref();
  return {
    root,
    synced: false,
    async close() {
      clearInterval(timer);
      await flushing;
      await flush(root);
      await root.close();
    },
  };
}
