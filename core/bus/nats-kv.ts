import { setTimeout as sleep } from 'node:timers/promises';
import { nanos, type KV, type KvEntry, type QueuedIterator } from 'nats';
import { SvcError } from '../errors/index.ts';
import { asPromise } from './as-promise.ts';
import type { BusLogger, KeyValueEntry, KeyValueOptions, KeyValueStore, KeyValueStores, Subscription } from './bus.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertKey, assertName, assertPattern } from './names.ts';
import type { NatsLink } from './nats-connection.ts';

function toEntry(entry: KvEntry): KeyValueEntry {
  const deleted = entry.operation !== 'PUT';
  return {
    key: entry.key,
    value: deleted ? undefined : decodePayload(entry.value),
    revision: entry.revision,
    operation: deleted ? 'DEL' : 'PUT',
  };
}

/** JetStream's answer to a write whose expected revision is not the key's. */
const WRONG_LAST_SEQUENCE = 10071;

function unavailable(what: string, error: unknown): SvcError {
  return new SvcError('SVC-SYS-9001', `${what}: ${(error as Error).message}`);
}

class NatsKeyValueStore implements KeyValueStore {
  readonly #kv: KV;
  readonly #link: NatsLink;
  readonly #bucket: string;
  readonly #logger: BusLogger;

  constructor(kv: KV, link: NatsLink, bucket: string, logger: BusLogger) {
    this.#kv = kv;
    this.#link = link;
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

  async putIf(key: string, value: unknown, revision: number | null): Promise<number | null> {
    const payload = await asPromise(() => {
      assertKey(key);
      return encodePayload(value);
    });
    // `create` also takes a key whose last entry is a deletion.
    const write = revision === null ? this.#kv.create(key, payload) : this.#kv.update(key, payload, revision);
    return write.catch((error: unknown) => {
      if ((error as { api_error?: { err_code?: number } }).api_error?.err_code === WRONG_LAST_SEQUENCE) return null;
      throw unavailable(`cannot write ${this.#bucket}/${key}`, error);
    });
  }

  async delete(key: string): Promise<void> {
    await asPromise(() => assertKey(key));
    await this.#kv.delete(key).catch((error: unknown) => {
      throw unavailable(`cannot delete ${this.#bucket}/${key}`, error);
    });
  }

  /**
   * A watch that outlives server restarts: after every reconnect it starts over (current values,
   * then changes) and passes on only what is newer than the last revision it delivered.
   */
  async watch(filter: string, callback: (entry: KeyValueEntry) => void | Promise<void>): Promise<Subscription> {
    await asPromise(() => assertPattern(filter, 'filter'));
    let lastRevision = 0;
    let delivered: Promise<void> = Promise.resolve();
    const deliver = (entry: KvEntry): Promise<void> =>
      (delivered = delivered.then(async () => {
        if (entry.revision <= lastRevision) return;
        lastRevision = entry.revision;
        try {
          await callback(toEntry(entry));
        } catch (error) {
          this.#logger.error({ err: error, bucket: this.#bucket, key: entry.key }, 'key-value watch callback failed');
        }
      }));

    let stopCurrent: () => void = () => undefined;
    /**
     * The client signals the end of the current values either from its queue, after the values
     * before it were handed out, or at once when they all arrived before the watch was set up,
     * before any was handed out. Either way the watch is current once as many entries as the
     * client had received at that signal have been delivered.
     */
    const start = async (): Promise<void> => {
      let handled = 0;
      let target: number | undefined;
      let current!: () => void;
      const ready = new Promise<void>((resolve) => (current = resolve));
      const check = (): void => {
        if (target !== undefined && handled >= target) current();
      };
      const source: { entries?: QueuedIterator<KvEntry> } = {};
      let signalled = false;
      const initialized = (): void => {
        signalled = true;
        if (source.entries === undefined) return;
        target = source.entries.getReceived();
        check();
      };
      const entries = await this.#kv.watch({ key: filter, initializedFn: initialized }).catch((error: unknown) => {
        throw unavailable(`cannot watch ${this.#bucket}/${filter}`, error);
      });
      source.entries = entries;
      if (signalled) initialized();
      stopCurrent = () => entries.stop();
      void (async () => {
        for await (const entry of entries) {
          await deliver(entry);
          handled++;
          check();
        }
      })().catch((error: unknown) =>
        this.#logger.warn(
          { err: error, bucket: this.#bucket, filter },
          'key-value watch ended; it restarts on reconnect',
        ),
      );
      await ready;
    };

    await start();
    let closed = false;
    let restarting = Promise.resolve();
    // JetStream may need a moment after a reconnect; keep trying until the watch is back.
    const restart = async (): Promise<void> => {
      stopCurrent();
      for (let attempt = 0; !closed; attempt++) {
        try {
          return await start();
        } catch (error) {
          this.#logger.warn(
            { err: error, bucket: this.#bucket, filter, attempt },
            'key-value watch could not restart; retrying',
          );
          await sleep(Math.min(5_000, 250 * 2 ** attempt));
        }
      }
    };
    const removeListener = this.#link.onReconnect(() => void (restarting = restarting.then(restart)));
    return {
      unsubscribe: async () => {
        closed = true;
        removeListener();
        await restarting;
        stopCurrent();
        await delivered;
      },
    };
  }
}

/**
 * JetStream key-value buckets keeping one value per key (history 1). With `create` off the bucket
 * must exist already, so credentials that may not manage streams can still read and watch.
 */
export class NatsKeyValueStores implements KeyValueStores {
  readonly #link: NatsLink;
  readonly #logger: BusLogger;
  readonly #create: boolean;

  constructor(link: NatsLink, logger: BusLogger, options: { create?: boolean } = {}) {
    this.#link = link;
    this.#logger = logger;
    this.#create = options.create ?? true;
  }

  async open(bucket: string, options: KeyValueOptions = {}): Promise<KeyValueStore> {
    await asPromise(() => assertName('bucket', bucket));
    const { maxAgeMs } = options;
    const kv = await this.#link.nc
      .jetstream()
      // Direct get names the key in the request subject, so permissions can limit reads per tenant.
      .views.kv(
        bucket,
        this.#create
          ? { history: 1, ...(maxAgeMs === undefined ? {} : { ttl: maxAgeMs }) }
          : { bindOnly: true, allow_direct: true },
      )
      .catch((error: unknown) => {
        throw unavailable(`cannot open key-value bucket ${bucket}`, error);
      });
    if (this.#create && maxAgeMs !== undefined) await this.#keepMaxAge(bucket, maxAgeMs);
    return new NatsKeyValueStore(kv, this.#link, bucket, this.#logger);
  }

  /** A bucket made with another age limit (the setting changed since) gets the configured one. */
  async #keepMaxAge(bucket: string, maxAgeMs: number): Promise<void> {
    const stream = `KV_${bucket}`;
    const maxAge = nanos(maxAgeMs);
    try {
      const manager = await this.#link.nc.jetstreamManager();
      const { config } = await manager.streams.info(stream);
      if (config.max_age !== maxAge)
        await manager.streams.update(stream, {
          ...config,
          max_age: maxAge,
          // The server refuses a de-duplication window longer than the age limit.
          duplicate_window: Math.min(config.duplicate_window, maxAge),
        });
    } catch (error) {
      throw unavailable(`cannot set the age limit of key-value bucket ${bucket}`, error);
    }
  }
}
