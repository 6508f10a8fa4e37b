import type { BusLogger, KeyValueEntry, KeyValueOptions, KeyValueStore, KeyValueStores, Subscription } from './bus.ts';
import { asPromise } from './as-promise.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertKey, assertName, assertPattern } from './names.ts';
import { subjectMatches } from './subjects.ts';

interface Watcher {
  filter: string;
  callback: (entry: KeyValueEntry) => void | Promise<void>;
  /** Changes are handed over one at a time, in revision order, as a KV watch does. */
  queue: Promise<void>;
}

/** One bucket in memory, keeping the last value per key (history 1). */
class MemoryKeyValueStore implements KeyValueStore {
  /** In the order written, so the oldest are first when values age out. */
  readonly #entries = new Map<string, { payload: Uint8Array; revision: number; writtenAt: number }>();
  readonly #watchers = new Set<Watcher>();
  readonly #logger: BusLogger;
  readonly #bucket: string;
  #revision = 0;
  #maxAgeMs: number | undefined;

  constructor(bucket: string, logger: BusLogger) {
    this.#bucket = bucket;
    this.#logger = logger;
  }

  set maxAgeMs(value: number | undefined) {
    this.#maxAgeMs = value;
  }

  /** Removes the values older than the bucket's age limit, as JetStream does (no watch hears of it). */
  #expire(): void {
    if (this.#maxAgeMs === undefined) return;
    const oldest = Date.now() - this.#maxAgeMs;
    for (const [key, stored] of this.#entries) {
      if (stored.writtenAt > oldest) return;
      this.#entries.delete(key);
    }
  }

  get(key: string): Promise<KeyValueEntry | undefined> {
    return asPromise(() => {
      assertKey(key);
      this.#expire();
      const stored = this.#entries.get(key);
      return (
        stored && { key, value: decodePayload(stored.payload), revision: stored.revision, operation: 'PUT' as const }
      );
    });
  }

  put(key: string, value: unknown): Promise<number> {
    return asPromise(() => this.#put(key, value));
  }

  putIf(key: string, value: unknown, revision: number | null): Promise<number | null> {
    return asPromise(() => {
      assertKey(key);
      this.#expire();
      return (this.#entries.get(key)?.revision ?? null) === revision ? this.#put(key, value) : null;
    });
  }

  #put(key: string, value: unknown): number {
    assertKey(key);
    const payload = encodePayload(value);
    const revision = ++this.#revision;
    this.#expire();
    this.#entries.delete(key);
    this.#entries.set(key, { payload, revision, writtenAt: Date.now() });
    this.#notify(key, () => ({ key, value: decodePayload(payload), revision, operation: 'PUT' }));
    return revision;
  }

  delete(key: string): Promise<void> {
    return asPromise(() => {
      assertKey(key);
      const revision = ++this.#revision;
      this.#entries.delete(key);
      this.#notify(key, () => ({ key, value: undefined, revision, operation: 'DEL' }));
    });
  }

  async watch(filter: string, callback: (entry: KeyValueEntry) => void | Promise<void>): Promise<Subscription> {
    assertPattern(filter, 'filter');
    const watcher: Watcher = { filter, callback, queue: Promise.resolve() };
    this.#expire();
    for (const [key, stored] of [...this.#entries].sort((a, b) => a[1].revision - b[1].revision)) {
      if (subjectMatches(filter, key))
        this.#enqueue(watcher, {
          key,
          value: decodePayload(stored.payload),
          revision: stored.revision,
          operation: 'PUT',
        });
    }
    this.#watchers.add(watcher);
    await watcher.queue;
    return {
      unsubscribe: async () => {
        this.#watchers.delete(watcher);
        await watcher.queue;
      },
    };
  }

  #notify(key: string, entry: () => KeyValueEntry): void {
    for (const watcher of this.#watchers) {
      if (subjectMatches(watcher.filter, key)) this.#enqueue(watcher, entry());
    }
  }

  #enqueue(watcher: Watcher, entry: KeyValueEntry): void {
    watcher.queue = watcher.queue.then(async () => {
      try {
        await watcher.callback(entry);
      } catch (error) {
        this.#logger.error({ err: error, bucket: this.#bucket, key: entry.key }, 'key-value watch callback failed');
      }
    });
  }
}

/** In-process key-value buckets for standalone mode. */
export class MemoryKeyValueStores implements KeyValueStores {
  readonly #buckets = new Map<string, MemoryKeyValueStore>();
  readonly #logger: BusLogger;

  constructor(logger: BusLogger) {
    this.#logger = logger;
  }

  open(bucket: string, options: KeyValueOptions = {}): Promise<KeyValueStore> {
    return asPromise(() => {
      assertName('bucket', bucket);
      let store = this.#buckets.get(bucket);
      if (!store) {
        store = new MemoryKeyValueStore(bucket, this.#logger);
        this.#buckets.set(bucket, store);
      }
      if (options.maxAgeMs !== undefined) store.maxAgeMs = options.maxAgeMs;
      return store;
    });
  }
}
