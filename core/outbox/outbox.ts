import { setTimeout as sleep } from 'node:timers/promises';
import { Counter, Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import type { Bus, BusLogger } from '../bus/bus.ts';
import { assertEventSubject } from '../bus/names.ts';
import { isSvcError, parseOrThrow, SvcError } from '../errors/index.ts';
import { outboxEventSchema, type OutboxEvent, type OutboxStorage } from './outbox-storage.ts';

/** How often a backoff looks whether a bus that was down is back. */
const RECONNECT_CHECK_MS = 250;

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
  storage: OutboxStorage;
  registry: Registry;
  /** Names the metrics: `<prefix>_depth`, `<prefix>_published_total`, `<prefix>_dropped_total`. */
  metricPrefix: string;
  logger: BusLogger;
  random?: () => number;
}

/**
 * A durable outbox in front of the bus, for the proxy and the control plane alike. Events are
 * written to storage first (`append` on their own, `stage` inside the transaction of the change
 * they announce); a single publisher sends them in order with their id as msgId and removes each
 * only after the bus acknowledged it, so a crash or a NATS outage loses nothing and a resend
 * after a crash is dropped by the stream's de-duplication.
 */
export class Outbox {
  readonly #storage: OutboxStorage;
  readonly #bus: Bus;
  readonly #logger: BusLogger;
  readonly #random: () => number;
  readonly #options: z.output<typeof outboxOptionsSchema>;
  readonly #published: Counter;
  readonly #dropped: Counter;
  #entries = 0;
  #bytes = 0;
  #closed = false;
  #removals: Promise<void> = Promise.resolve();
  #wake: () => void = () => undefined;
  readonly #abort = new AbortController();
  readonly #loop: Promise<void>;

  constructor(deps: OutboxDeps, options: OutboxOptions = {}) {
    this.#options = parseOrThrow(outboxOptionsSchema, options, 'outbox options');
    this.#storage = deps.storage;
    this.#bus = deps.bus;
    this.#logger = deps.logger;
    this.#random = deps.random ?? Math.random;
    for (const { event } of this.#storage.stored()) {
      this.#entries++;
      this.#bytes += sizeOf(event);
    }

    const depth = (): number => this.#entries;
    new Gauge({
      name: `${deps.metricPrefix}_depth`,
      help: 'Events in the outbox not yet acknowledged by the bus',
      registers: [deps.registry],
      collect() {
        this.set(depth());
      },
    });
    this.#published = new Counter({
      name: `${deps.metricPrefix}_published_total`,
      help: 'Events the bus acknowledged and the outbox removed',
      registers: [deps.registry],
    });
    this.#dropped = new Counter({
      name: `${deps.metricPrefix}_dropped_total`,
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
    const [event, size] = this.#admit([input])[0]!;
    // Counted before the write lands so concurrent appends cannot overshoot the bounds.
    this.#entries++;
    this.#bytes += size;
    try {
      await this.#storage.append([event]);
    } catch (error) {
      this.#entries--;
      this.#bytes -= size;
      throw new SvcError('SVC-EVT-4001', `cannot write event to the outbox: ${(error as Error).message}`, {
        event_id: event.id,
      });
    }
    this.#wake();
  }

  /**
   * Writes events inside the caller's open storage transaction, which must commit right after
   * (it is the last step of the change). Throws, so that the transaction rolls back, when an
   * event is invalid or the outbox is full. Returns what to call once the transaction committed.
   */
  stage(inputs: readonly OutboxEvent[]): () => void {
    if (inputs.length === 0) return () => undefined;
    const admitted = this.#admit(inputs);
    this.#storage.appendInTransaction(admitted.map(([event]) => event));
    return () => {
      for (const [, size] of admitted) {
        this.#entries++;
        this.#bytes += size;
      }
      this.#wake();
    };
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

  /** Stops publishing (what is pending stays stored for the next start) and closes the storage. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#abort.abort();
    this.#wake();
    await this.#loop;
    await this.#storage.close();
  }

  /** Validates events and checks the bounds for all of them together; returns each with its size. */
  #admit(inputs: readonly OutboxEvent[]): Array<[OutboxEvent, number]> {
    const admitted: Array<[OutboxEvent, number]> = [];
    let bytes = 0;
    for (const input of inputs) {
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
      bytes += size;
      admitted.push([event, size]);
    }
    if (this.#entries + admitted.length > this.#options.maxEntries || this.#bytes + bytes > this.#options.maxBytes) {
      this.#dropped.inc(admitted.length);
      throw new SvcError('SVC-EVT-4001', 'event outbox is full; event not recorded', {
        event_id: admitted[0]?.[0].id,
        depth: this.#entries,
        max_entries: this.#options.maxEntries,
        bytes: this.#bytes,
        max_bytes: this.#options.maxBytes,
      });
    }
    return admitted;
  }

  async #run(): Promise<void> {
    let failures = 0;
    // The last key handed over for good; removals commit in the background, so reads start after it.
    let done = 0;
    while (!this.#closed) {
      const next = this.#storage.next(done);
      if (!next) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        continue;
      }
      try {
        await this.#bus.publish(next.event.subject, next.event.data, { msgId: next.event.id });
        failures = 0;
        done = next.key;
        this.#remove(next.key, next.event);
        this.#published.inc();
      } catch (error) {
        if (isSvcError(error) && !error.spec.retryable) {
          // The bus will never take this event; keeping it would block every event behind it.
          this.#logger.error(
            { err: error, event_id: next.event.id },
            'bus refused an outbox event as invalid; dropped',
          );
          this.#dropped.inc();
          done = next.key;
          this.#remove(next.key, next.event);
          continue;
        }
        failures++;
        this.#logger.warn(
          { err: error, event_id: next.event.id, depth: this.#entries, failures },
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
    const removal = this.#storage.remove(key).then(
      () => undefined,
      (error: unknown) =>
        this.#logger.warn(
          { err: error, event_id: event.id },
          'outbox could not remove a sent event; it will be sent again',
        ),
    );
    this.#removals = Promise.all([this.#removals, removal]).then(() => undefined);
  }

  /** Exponential backoff with a cap and equal jitter, so many processes do not retry in step. */
  #backoff(failures: number): number {
    const ceiling = Math.min(this.#options.maxBackoffMs, this.#options.initialBackoffMs * 2 ** (failures - 1));
    return ceiling / 2 + this.#random() * (ceiling / 2);
  }
}

function sizeOf(event: OutboxEvent): number {
  return Buffer.byteLength(JSON.stringify(event));
}
