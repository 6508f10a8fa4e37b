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

  async put(event: OutboxEvent): Promise<void> {
    await this.#db.put(event.id, event);
    if (this.#synced) await this.#root.flushed;
  }

  /** A removal lost to a crash publishes its event again at the next start, which its id makes a duplicate. */
  async remove(id: string): Promise<void> {
    await this.#db.remove(id);
  }

  all(): OutboxEvent[] {
    return Array.from(this.#db.getRange(), ({ value }) => value);
  }
}
