import type { Database, RootDatabase } from 'lmdb';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import type { ProvisionalStore } from '../governance/event-recorder.ts';
import type { ProxyStore } from './open-store.ts';

/**
 * The provisional events of the proxy's LMDB store (database `provisional`, by event id): written
 * like the outbox's, so a process killed keeps them, and never published from here
 * (`EventRecorder.provisional`).
 */
export class ProvisionalEvents implements ProvisionalStore {
  readonly #root: RootDatabase;
  readonly #db: Database<OutboxEvent, string>;
  readonly #synced: boolean;

  constructor(store: Pick<ProxyStore, 'root' | 'synced'>) {
    this.#root = store.root;
    this.#synced = store.synced;
    this.#db = store.root.openDB<OutboxEvent, string>({ name: 'provisional', encoding: 'msgpack' });
  }

  /**
   * Without a flush per commit, committed before this returns: the event is in the page cache,
   * which a killed process does not lose, before the agent's answer it stands for ends. That
   * synchronous commit holds the event loop about 0.05 ms (p50), under 2 ms (p99), beside a busy
   * outbox (docs/performance.md). With one, a commit here would wait for the disk on the event
   * loop: the write goes to LMDB's writer thread instead, and resolves once flushed, which a cut
   * answer waits for before it ends (`cutCall`).
   */
  async put(event: OutboxEvent): Promise<void> {
    if (!this.#synced) {
      this.#db.putSync(event.id, event);
      return;
    }
    await this.#db.put(event.id, event);
    await this.#root.flushed;
  }

  /** A removal lost to a crash publishes its event again at the next start, which its id makes a duplicate. */
  async remove(id: string): Promise<void> {
    await this.#db.remove(id);
  }

  all(): OutboxEvent[] {
    return Array.from(this.#db.getRange(), ({ value }) => value);
  }
}
