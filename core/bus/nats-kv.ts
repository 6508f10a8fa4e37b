import type { KV, KvEntry, NatsConnection } from 'nats';
import { SvcError } from '../errors/index.ts';
import { asPromise } from './as-promise.ts';
import type { BusLogger, KeyValueEntry, KeyValueStore, KeyValueStores, Subscription } from './bus.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertKey, assertName, assertPattern } from './names.ts';

function toEntry(entry: KvEntry): KeyValueEntry {
  const deleted = entry.operation !== 'PUT';
  return { key: entry.key, value: deleted ? undefined : decodePayload(entry.value), revision: entry.revision, operation: deleted ? 'DEL' : 'PUT' };
}

function unavailable(what: string, error: unknown): SvcError {
  return new SvcError('SVC-SYS-9001', `${what}: ${(error as Error).message}`);
}

class NatsKeyValueStore implements KeyValueStore {
  readonly #kv: KV;
  readonly #bucket: string;
  readonly #logger: BusLogger;

  constructor(kv: KV, bucket: string, logger: BusLogger) {
    this.#kv = kv;
    this.#bucket = bucket;
    this.#logger = logger;
  }

  async get(key: string): Promise<KeyValueEntry | undefined> {
    await asPromise(() => assertKey(key));
    const entry = await this.#kv.get(key).catch((error: unknown) => {
      throw unavailable(`cannot read ${this.#bucket}/${key}`, error);
    });
    return entry && entry.operation === 'PUT' ? toEntry(entry) : undefined;
  }

  async put(key: string, value: unknown): Promise<number> {
    const payload = await asPromise(() => {
      assertKey(key);
      return encodePayload(value);
    });
    return this.#kv.put(key, payload).catch((error: unknown) => {
      throw unavailable(`cannot write ${this.#bucket}/${key}`, error);
    });
  }

  async delete(key: string): Promise<void> {
    await asPromise(() => assertKey(key));
    await this.#kv.delete(key).catch((error: unknown) => {
      throw unavailable(`cannot delete ${this.#bucket}/${key}`, error);
    });
  }

  async watch(filter: string, callback: (entry: KeyValueEntry) => void | Promise<void>): Promise<Subscription> {
    await asPromise(() => assertPattern(filter, 'filter'));
    let initialized!: () => void;
    const ready = new Promise<void>((resolve) => (initialized = resolve));
    // An ordered consumer underneath: it re-creates itself after a reconnect, so the watch survives outages.
    const iterator = await this.#kv.watch({ key: filter, initializedFn: () => initialized() }).catch((error: unknown) => {
      throw unavailable(`cannot watch ${this.#bucket}/${filter}`, error);
    });
    const done = (async () => {
      for await (const entry of iterator) {
        try {
          await callback(toEntry(entry));
        } catch (error) {
          this.#logger.error({ err: error, bucket: this.#bucket, key: entry.key }, 'key-value watch callback failed');
        }
      }
    })();
    await ready;
    return {
      unsubscribe: async () => {
        iterator.stop();
        await done;
      },
    };
  }
}

/**
 * JetStream key-value buckets keeping one value per key (history 1). With `create` off the bucket
 * must exist already, so credentials that may not manage streams can still read and watch.
 */
export class NatsKeyValueStores implements KeyValueStores {
  readonly #nc: NatsConnection;
  readonly #logger: BusLogger;
  readonly #create: boolean;

  constructor(nc: NatsConnection, logger: BusLogger, options: { create?: boolean } = {}) {
    this.#nc = nc;
    this.#logger = logger;
    this.#create = options.create ?? true;
  }

  async open(bucket: string): Promise<KeyValueStore> {
    await asPromise(() => assertName('bucket', bucket));
    const kv = await this.#nc
      .jetstream()
      // Direct get names the key in the request subject, so permissions can limit reads per tenant.
      .views.kv(bucket, this.#create ? { history: 1 } : { bindOnly: true, allow_direct: true })
      .catch((error: unknown) => {
        throw unavailable(`cannot open key-value bucket ${bucket}`, error);
      });
    return new NatsKeyValueStore(kv, bucket, this.#logger);
  }
}
