import { setTimeout as sleep } from 'node:timers/promises';
import { Counter, Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import type { Bus, BusLogger } from '../bus/bus.ts';
import { assertEventSubject } from '../bus/names.ts';
import { isSvcError, parseOrThrow, SvcError } from '../errors/index.ts';
import {
  eventDataJson,
  eventSize,
  outboxEventSchema,
  type OutboxDepth,
  type OutboxEvent,
  type OutboxStorage,
} from './outbox-storage.ts';

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
  /** Events claimed per round; their removal after the bus took them is one storage write. */
  claimBatch: z.number().int().positive().default(100),
  /**
   * How often an idle publisher looks for events it was not told of: those other processes wrote
   * to a shared storage, or left claimed when they stopped.
   */
  pollMs: z.number().int().positive().default(1000),
  /**
   * How long the publisher waits, once told of new events, before it claims them: what is
   * appended meanwhile goes out in the same claim, settled by one storage write, and its work
   * stays out of the turns that serve the calls appending. 0: in the next turn of the event loop.
   */
  publishDelayMs: z.number().int().nonnegative().default(0),
});
export type OutboxOptions = z.input<typeof outboxOptionsSchema>;

/** Room held in an outbox for events not yet appended (`Outbox.reserveRoom`). */
export interface OutboxRoom {
  /** Gives the room back; an append that names the room does so itself. Idempotent. */
  release(): void;
}

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
 * they announce); a publisher claims them in order, sends each with its id as msgId and removes
 * it only after the bus acknowledged it, so a crash or a NATS outage loses nothing and a resend
 * after a crash is dropped by the stream's de-duplication. Several processes may drain one
 * shared storage: each claim goes to one of them.
 */
export class Outbox {
  readonly #storage: OutboxStorage;
  readonly #bus: Bus;
  readonly #logger: BusLogger;
  readonly #random: () => number;
  readonly #options: z.output<typeof outboxOptionsSchema>;
  readonly #published: Counter;
  readonly #dropped: Counter;
  /** Admitted by this process and not yet in the storage's depth: counted against the bounds. */
  readonly #reserved = { entries: 0, bytes: 0 };
  #closed = false;
  /** Set by `notify` (and close); the publisher looks again at once instead of waiting. */
  #woken = false;
  #wake: () => void = () => undefined;
  readonly #abort = new AbortController();
  readonly #loop: Promise<void>;

  constructor(deps: OutboxDeps, options: OutboxOptions = {}) {
    this.#options = parseOrThrow(outboxOptionsSchema, options, 'outbox options');
    this.#storage = deps.storage;
    this.#bus = deps.bus;
    this.#logger = deps.logger;
    this.#random = deps.random ?? Math.random;

    const depth = () => this.depth();
    new Gauge({
      name: `${deps.metricPrefix}_depth`,
      help: 'Events in the outbox not yet acknowledged by the bus',
      registers: [deps.registry],
      async collect() {
        this.set(await depth());
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
  async depth(): Promise<number> {
    return (await this.#storage.depth()).entries;
  }

  /**
   * Holds room for `entries` events of `bytes` in all, counted against the bounds as appends in
   * progress are, until released or taken by an append that names it: a caller that must not act
   * unless it can record what it did (a governed call) takes it first. Null when the outbox,
   * counting what it holds and what is held for others, has no such room.
   */
  async reserveRoom(entries: number, bytes: number): Promise<OutboxRoom | null> {
    const held = await this.#storage.depth();
    // From here to the reservation nothing awaits, so concurrent reservations see each other.
    if (this.#closed || !this.#fits(held, entries, bytes)) return null;
    return { release: this.#reserve(entries, bytes) };
  }

  /**
   * Writes the event and resolves once it is on disk. A full outbox refuses it with SVC-EVT-4001
   * (and counts it), so the caller knows this event was not recorded. Given the room held for it,
   * it takes that room instead of looking for more.
   */
  async append(input: OutboxEvent, room?: OutboxRoom): Promise<void> {
    // An event refused before it was counted gives the room back all the same.
    const { events, release } = await this.#admit([input], room).finally(() => room?.release());
    try {
      await this.#storage.append(events);
    } catch (error) {
      throw new SvcError('SVC-EVT-4001', `cannot write event to the outbox: ${(error as Error).message}`, {
        event_id: events[0]!.id,
      });
    } finally {
      release();
    }
    this.notify();
  }

  /**
   * Validates events and checks the bounds, then hands them to `append`, which writes them inside
   * the caller's open storage transaction (`tx.outbox.append`). Throws, so that the transaction
   * rolls back, when an event is invalid or the outbox is full. Call `notify` once it committed.
   */
  async stage(inputs: readonly OutboxEvent[], append: (events: OutboxEvent[]) => Promise<void>): Promise<void> {
    if (inputs.length === 0) return;
    const { events, release } = await this.#admit(inputs);
    try {
      await append(events);
    } finally {
      release();
    }
  }

  /**
   * Tells the publisher that events were committed, so it sends them without waiting for its poll.
   * It wakes `publishDelayMs` later, at the soonest in the next turn of the event loop: woken at
   * once, its claim, publication and removal commit would run among the microtasks of the
   * append's caller, ahead of the answer that waits for that append (about 0.1 ms on every
   * governed call).
   */
  notify(): void {
    if (this.#woken) return;
    this.#woken = true;
    const delay = this.#options.publishDelayMs;
    if (delay === 0) setImmediate(() => this.#wake());
    // Like the poll, the wait does not keep a process alive: what it holds is stored.
    else setTimeout(() => this.#wake(), delay).unref();
  }

  /** Resolves once the outbox is empty, or rejects with SVC-EVT-4001 after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let depth = await this.depth(); depth > 0; depth = await this.depth()) {
      if (Date.now() > deadline) throw new SvcError('SVC-EVT-4001', `outbox still holds ${depth} events`, { depth });
      await sleep(20);
    }
  }

  /** Stops publishing (what is pending stays stored for the next start) and closes the storage. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#abort.abort();
    // At once, not after the publish delay.
    this.#woken = true;
    this.#wake();
    await this.#loop;
    await this.#storage.close();
  }

  /**
   * Validates events and checks the bounds for all of them together, counting them as reserved
   * until `release` (by then the storage counts them, or they were not written).
   */
  async #admit(
    inputs: readonly OutboxEvent[],
    room?: OutboxRoom,
  ): Promise<{ events: OutboxEvent[]; release: () => void }> {
    const events: OutboxEvent[] = [];
    let bytes = 0;
    for (const input of inputs) {
      const event = parseOrThrow(outboxEventSchema, input, 'outbox event');
      assertEventSubject('subject', event.subject);
      const size = eventSize(event);
      if (size > this.#options.maxEventBytes) {
        throw new SvcError(
          'SVC-SYS-9009',
          `event of ${size} bytes exceeds the ${this.#options.maxEventBytes}-byte limit`,
          { event_id: event.id, bytes: size },
          [{ field: 'data', description: `must encode to at most ${this.#options.maxEventBytes} bytes` }],
        );
      }
      bytes += size;
      events.push(event);
    }
    const held = await this.#storage.depth();
    // From here to the reservation nothing awaits, so concurrent admissions see each other, and
    // the room held for these events is theirs.
    room?.release();
    if (this.#closed) throw new SvcError('SVC-EVT-4001', 'outbox is closed', { event_id: events[0]?.id });
    if (!this.#fits(held, events.length, bytes)) {
      this.#dropped.inc(events.length);
      throw new SvcError('SVC-EVT-4001', 'event outbox is full; event not recorded', {
        event_id: events[0]?.id,
        depth: held.entries + this.#reserved.entries,
        max_entries: this.#options.maxEntries,
        bytes: held.bytes + this.#reserved.bytes,
        max_bytes: this.#options.maxBytes,
      });
    }
    return { events, release: this.#reserve(events.length, bytes) };
  }

  /** Whether `entries` events of `bytes` fit beside what the storage holds and what is reserved. */
  #fits(held: OutboxDepth, entries: number, bytes: number): boolean {
    return (
      held.entries + this.#reserved.entries + entries <= this.#options.maxEntries &&
      held.bytes + this.#reserved.bytes + bytes <= this.#options.maxBytes
    );
  }

  /** Counts room as taken until the function it returns is called (once; later calls do nothing). */
  #reserve(entries: number, bytes: number): () => void {
    this.#reserved.entries += entries;
    this.#reserved.bytes += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#reserved.entries -= entries;
      this.#reserved.bytes -= bytes;
    };
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#closed) {
      this.#woken = false;
      let claim;
      try {
        claim = await this.#storage.claim(this.#options.claimBatch);
      } catch (error) {
        failures++;
        this.#logger.warn({ err: error, failures }, 'outbox could not read its storage; backing off');
        await this.#pause(this.#backoff(failures));
        continue;
      }
      if (claim.entries.length === 0) {
        await claim.settle([]).catch(() => undefined);
        if (!this.#woken) await this.#idle();
        continue;
      }
      // The claim is sent at once and its acknowledgements read in order: waiting for each one
      // before the next send held the outbox to one event per round trip to the server. One
      // connection hands the server the events in order, so when the connection fails what the
      // server took is a prefix of what was sent. Only that prefix is settled: from the first
      // failure on, everything is sent again with the next claim, and the stream drops by msgId
      // what it had already taken. After a failure one event goes first, alone, so a bus that is
      // still away is not sent the whole claim on every retry.
      const sending = failures > 0 ? claim.entries.slice(0, 1) : claim.entries;
      const sent = await Promise.allSettled(
        sending.map(async ({ event }) =>
          this.#bus.publish(event.subject, event.data, { msgId: event.id, json: eventDataJson(event) }),
        ),
      );
      const done: number[] = [];
      let failed = false;
      for (const [i, { key, event }] of sending.entries()) {
        const outcome = sent[i] as PromiseSettledResult<void>;
        if (outcome.status === 'fulfilled') {
          failures = 0;
          done.push(key);
          this.#published.inc();
          continue;
        }
        const error: unknown = outcome.reason;
        if (isSvcError(error) && !error.spec.retryable) {
          // The bus will never take this event; keeping it would block every event behind it.
          this.#logger.error({ err: error, event_id: event.id }, 'bus refused an outbox event as invalid; dropped');
          this.#dropped.inc();
          done.push(key);
          continue;
        }
        failures++;
        failed = true;
        this.#logger.warn({ err: error, event_id: event.id, failures }, 'outbox publish failed; backing off');
        break;
      }
      // Should the process die before the removal lands, the events go out again at the next
      // start and the stream drops them by msgId.
      await claim
        .settle(done)
        .catch((error: unknown) =>
          this.#logger.warn(
            { err: error, events: done.length },
            'outbox could not remove sent events; they will be sent again',
          ),
        );
      if (failed) await this.#pause(this.#backoff(failures));
    }
  }

  /** Waits until `notify`, the poll interval or close. */
  async #idle(): Promise<void> {
    await new Promise<void>((resolve) => {
      // Polling alone does not keep a process alive.
      const timer = setTimeout(resolve, this.#options.pollMs).unref();
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#wake = () => undefined;
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

  /** Exponential backoff with a cap and equal jitter, so many processes do not retry in step. */
  #backoff(failures: number): number {
    const ceiling = Math.min(this.#options.maxBackoffMs, this.#options.initialBackoffMs * 2 ** (failures - 1));
    return ceiling / 2 + this.#random() * (ceiling / 2);
  }
}
