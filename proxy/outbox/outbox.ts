import { setTimeout as sleep } from 'node:timers/promises';
import { open, type Database, type RootDatabase } from 'lmdb';
import { Counter, Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import type { Bus, BusLogger } from '../../core/bus/bus.ts';
import { assertEventSubject } from '../../core/bus/names.ts';
import { isSvcError, parseOrThrow, SvcError } from '../../core/errors/index.ts';

/** How often a backoff looks whether a bus that was down is back. */
const RECONNECT_CHECK_MS = 250;

/** One event waiting for the bus: `id` is the msgId, so a replay is dropped by JetStream de-dup. */
export const outboxEventSchema = z.object({
  id: z.string().min(1).max(256),
  subject: z.string().min(1),
  data: z.unknown(),
});
export type OutboxEvent = z.infer<typeof outboxEventSchema>;

export const outboxOptionsSchema = z.object({
  /** Most events held; beyond it new events are refused (see docs/nats.md, outbox policy). */
  maxEntries: z.number().int().positive().default(100_000),
  /** Most bytes held (JSON size of the events), refused beyond as for `maxEntries`. */
  maxBytes: z
    .number()
    .int()
    .positive()
    .default(256 * 1024 * 1024),
  /** Largest event taken (JSON size); keep it at or below the server's max_payload. */
  maxEventBytes: z
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  /** First backoff after a failed publish; it doubles per failure up to `maxBackoffMs`. */
  initialBackoffMs: z.number().int().positive().default(250),
  maxBackoffMs: z.number().int().positive().default(30_000),
});
export type OutboxOptions = z.input<typeof outboxOptionsSchema>;

export interface OutboxDeps {
  bus: Bus;
  /** An open LMDB root (the proxy's store) or a path to open one at; a root passed in stays open on close. */
  store: { root: RootDatabase } | { path: string };
  registry: Registry;
  logger: BusLogger;
  random?: () => number;
}

const DB_NAME = 'outbox';

/**
 * The proxy's durable outbox. `append` returns once the event is on disk; a single publisher
 * sends events in append order and removes each one only after the bus acknowledged it. Keys are
 * a sequence continued across restarts, so the order survives a crash and a reopen sends what was
 * pending exactly once (a publish that reached the bus before the crash is dropped there by msgId).
 */
export class Outbox {
  readonly #db: Database<OutboxEvent, number>;
  readonly #root: RootDatabase;
  readonly #ownsRoot: boolean;
  readonly #bus: Bus;
  readonly #logger: BusLogger;
  readonly #random: () => number;
  readonly #options: z.output<typeof outboxOptionsSchema>;
  readonly #published: Counter;
  readonly #dropped: Counter;
  #nextSeq: number;
  #entries = 0;
  #bytes = 0;
  #closed = false;
  #removals: Promise<void> = Promise.resolve();
  #wake: () => void = () => undefined;
  readonly #abort = new AbortController();
  readonly #loop: Promise<void>;

  constructor(deps: OutboxDeps, options: OutboxOptions = {}) {
    this.#options = parseOrThrow(outboxOptionsSchema, options, 'outbox options');
    this.#ownsRoot = 'path' in deps.store;
    this.#root = 'path' in deps.store ? open({ path: deps.store.path }) : deps.store.root;
    this.#db = this.#root.openDB<OutboxEvent, number>({ name: DB_NAME, encoding: 'msgpack' });
    this.#bus = deps.bus;
    this.#logger = deps.logger;
    this.#random = deps.random ?? Math.random;

    let last = 0;
    for (const { key, value } of this.#db.getRange()) {
      last = key;
      this.#entries++;
      this.#bytes += sizeOf(value);
    }
    this.#nextSeq = last + 1;

    const depth = (): number => this.#entries;
    new Gauge({
      name: 'svc_proxy_outbox_depth',
      help: 'Events in the outbox not yet acknowledged by the bus',
      registers: [deps.registry],
      collect() {
        this.set(depth());
      },
    });
    this.#published = new Counter({
      name: 'svc_proxy_outbox_published_total',
      help: 'Events the bus acknowledged and the outbox removed',
      registers: [deps.registry],
    });
    this.#dropped = new Counter({
      name: 'svc_proxy_outbox_dropped_total',
      help: 'Events refused because the outbox was full, or rejected by the bus as invalid',
      registers: [deps.registry],
    });
    this.#loop = this.#run();
  }

  /** Events waiting (written, not yet acknowledged). */
  depth(): number {
    return this.#entries;
  }

  /**
   * Writes the event and resolves once it is on disk. A full outbox refuses it with SVC-EVT-4001
   * (and counts it), so the caller knows this event was not recorded.
   */
  async append(input: OutboxEvent): Promise<void> {
    const event = parseOrThrow(outboxEventSchema, input, 'outbox event');
    assertEventSubject('subject', event.subject);
    if (this.#closed) throw new SvcError('SVC-EVT-4001', 'outbox is closed', { event_id: event.id });
    const size = sizeOf(event);
    if (size > this.#options.maxEventBytes) {
      throw new SvcError(
        'SVC-SYS-9009',
        `event of ${size} bytes exceeds the ${this.#options.maxEventBytes}-byte limit`,
        { event_id: event.id, bytes: size },
        [{ field: 'data', description: `must encode to at most ${this.#options.maxEventBytes} bytes` }],
      );
    }
    if (this.#entries + 1 > this.#options.maxEntries || this.#bytes + size > this.#options.maxBytes) {
      this.#dropped.inc();
      throw new SvcError('SVC-EVT-4001', 'event outbox is full; event not recorded', {
        event_id: event.id,
        depth: this.#entries,
        max_entries: this.#options.maxEntries,
        bytes: this.#bytes,
        max_bytes: this.#options.maxBytes,
      });
    }
    // Counted before the write lands so concurrent appends cannot overshoot the bounds.
    this.#entries++;
    this.#bytes += size;
    try {
      await this.#db.put(this.#nextSeq++, event);
    } catch (error) {
      this.#entries--;
      this.#bytes -= size;
      throw new SvcError('SVC-EVT-4001', `cannot write event to the outbox: ${(error as Error).message}`, {
        event_id: event.id,
      });
    }
    this.#wake();
  }

  /** Resolves once the outbox is empty, or rejects with SVC-EVT-4001 after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#entries > 0) {
      if (Date.now() > deadline)
        throw new SvcError('SVC-EVT-4001', `outbox still holds ${this.#entries} events`, { depth: this.#entries });
      await sleep(20);
    }
  }

  /** Stops publishing (what is pending stays on disk for the next start) and closes the store if it opened it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#abort.abort();
    this.#wake();
    await this.#loop;
    if (this.#ownsRoot) await this.#root.close();
  }

  async #run(): Promise<void> {
    let failures = 0;
    // The last key handed over for good; removals commit in the background, so reads start after it.
    let done = 0;
    while (!this.#closed) {
      const [next] = [...this.#db.getRange({ start: done + 1, limit: 1 })];
      if (!next) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        continue;
      }
      try {
        await this.#bus.publish(next.value.subject, next.value.data, { msgId: next.value.id });
        failures = 0;
        done = next.key;
        this.#remove(next.key, next.value);
        this.#published.inc();
      } catch (error) {
        if (isSvcError(error) && !error.spec.retryable) {
          // The bus will never take this event; keeping it would block every event behind it.
          this.#logger.error(
            { err: error, event_id: next.value.id },
            'bus refused an outbox event as invalid; dropped',
          );
          this.#dropped.inc();
          done = next.key;
          this.#remove(next.key, next.value);
          continue;
        }
        failures++;
        this.#logger.warn(
          { err: error, event_id: next.value.id, depth: this.#entries, failures },
          'outbox publish failed; backing off',
        );
        await this.#pause(this.#backoff(failures));
      }
    }
    await this.#removals;
  }

  /**
   * Waits out a backoff, but when the bus was down and comes back meanwhile, goes on at once: a
   * replay after a long NATS outage starts within a moment of the reconnect, not after a backoff
   * of up to `maxBackoffMs`.
   */
  async #pause(ms: number): Promise<void> {
    const wasDown = !this.#bus.healthy();
    const until = Date.now() + ms;
    while (!this.#closed && Date.now() < until) {
      await sleep(Math.min(RECONNECT_CHECK_MS, until - Date.now()), undefined, { signal: this.#abort.signal }).catch(
        () => undefined,
      );
      if (wasDown && this.#bus.healthy()) return;
    }
  }

  /**
   * Removal is not awaited before the next publish: LMDB batches the removals into few commits.
   * Should the process die before one commits, the event is sent again at the next start and the
   * stream drops it by msgId.
   */
  #remove(key: number, event: OutboxEvent): void {
    this.#entries--;
    this.#bytes -= sizeOf(event);
    const removal = this.#db.remove(key).then(
      () => undefined,
      (error: unknown) =>
        this.#logger.warn(
          { err: error, event_id: event.id },
          'outbox could not remove a sent event; it will be sent again',
        ),
    );
    this.#removals = Promise.all([this.#removals, removal]).then(() => undefined);
  }

  /** Exponential backoff with a cap and equal jitter, so many proxies do not retry in step. */
  #backoff(failures: number): number {
    const ceiling = Math.min(this.#options.maxBackoffMs, this.#options.initialBackoffMs * 2 ** (failures - 1));
    return ceiling / 2 + this.#random() * (ceiling / 2);
  }
}

function sizeOf(event: OutboxEvent): number {
  return Buffer.byteLength(JSON.stringify(event));
}
