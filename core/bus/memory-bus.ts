import { randomUUID } from 'node:crypto';
import type { Registry } from 'prom-client';
import { SvcError } from '../errors/index.ts';
import type { BatchHandler, BatchOptions, Bus, BusLogger, BusMessage, PublishOptions, Subscription } from './bus.ts';
import { asPromise } from './as-promise.ts';
import { deliverInOrder, type Held } from './batch-delivery.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertEventSubject, assertName } from './names.ts';
import { LoggedMessage, setAsideAt } from './logged-message.ts';
import { PoisonMessages } from './poison.ts';
import type { RetryPolicy } from './retry-delivery.ts';
import { subjectMatcher, subjectMatches } from './subjects.ts';
import { UnreadDiscards, type DiscardBound } from './unread-discards.ts';

export interface MemoryBusOptions {
  logger: BusLogger;
  /** msgIds remembered for de-duplication: for this long… */
  duplicateWindowMs?: number;
  /** …and at most this many. */
  duplicateWindowSize?: number;
  /** Messages kept for durable subscribers; the oldest go first. */
  maxMessages?: number;
  /** …and at most this many bytes of them (default {@link MEMORY_BUS_MAX_BYTES}). */
  maxBytes?: number;
  /** Largest encoded payload accepted, as nats-server's `max_payload` (default 1 MiB). */
  maxPayloadBytes?: number;
  /** Delivery attempts of one message before it is set aside (counted and logged). */
  maxDeliver?: number;
  /** Backoff before the second attempt; it doubles per attempt. */
  retryBackoffMs?: number;
  /** Receives `svc_bus_poison_messages_total` and `svc_bus_unread_discarded_total`. */
  registry?: Registry;
  now?: () => number;
}

/**
 * What the in-process bus keeps at most, the oldest going first: one tenant's large events must
 * not grow a standalone process's memory without end (docs/nats.md).
 */
export const MEMORY_BUS_MAX_BYTES = 128 * 1024 * 1024;

interface StoredMessage {
  seq: number;
  subject: string;
  msgId: string;
  payload: Uint8Array;
}

/** A subscriber's position in the log; a durable's is kept by name across subscriptions. */
interface Cursor {
  nextSeq: number;
  active: boolean;
  pattern: string;
  /** The durable's name, or `ephemeral`, for the poison metric. */
  consumer: string;
}

/**
 * The in-process bus of standalone mode: an append-only log in memory with the guarantees of
 * the Bus interface. Each subscriber walks the log in order with its own cursor, so delivery is
 * ordered (per subject and overall) and a rejected handler holds its subscriber back until the
 * message is acknowledged or its attempts are used up. There is no dead-letter stream in process:
 * a message set aside is counted and logged.
 */
export class MemoryBus implements Bus {
  readonly #logger: BusLogger;
  readonly #duplicateWindowMs: number;
  readonly #duplicateWindowSize: number;
  readonly #maxMessages: number;
  readonly #maxBytes: number;
  readonly #retry: RetryPolicy;
  readonly #maxPayloadBytes: number;
  readonly #now: () => number;
  readonly #poison: PoisonMessages;
  readonly #discards: UnreadDiscards;

  readonly #log: StoredMessage[] = [];
  /** Encoded size of what `#log` holds. */
  #logBytes = 0;
  #nextSeq = 1;
  readonly #seen = new Map<string, number>();
  readonly #durables = new Map<string, Cursor>();
  /** Plain subscribers still reading: what they have not read yet stays. */
  readonly #ephemerals = new Set<Cursor>();
  readonly #loops = new Set<Promise<void>>();
  readonly #wakers = new Set<() => void>();
  #closing = false;

  constructor(options: MemoryBusOptions) {
    this.#logger = options.logger;
    this.#duplicateWindowMs = options.duplicateWindowMs ?? 120_000;
    this.#duplicateWindowSize = options.duplicateWindowSize ?? 100_000;
    this.#maxMessages = options.maxMessages ?? 100_000;
    this.#maxBytes = options.maxBytes ?? MEMORY_BUS_MAX_BYTES;
    this.#maxPayloadBytes = options.maxPayloadBytes ?? 1024 * 1024;
    this.#retry = {
      maxDeliver: options.maxDeliver ?? 5,
      backoffMs: options.retryBackoffMs ?? 100,
      maxBackoffMs: 5_000,
    };
    this.#now = options.now ?? Date.now;
    this.#poison = new PoisonMessages(options.logger, options.registry);
    this.#discards = new UnreadDiscards(options.logger, options.registry);
  }

  publish(subject: string, data: unknown, options: PublishOptions = {}): Promise<void> {
    return asPromise(() => this.#append(subject, data, options));
  }

  #append(subject: string, data: unknown, options: PublishOptions): void {
    if (this.#closing) throw new SvcError('SVC-EVT-4001', 'bus is closed', { subject });
    assertEventSubject('subject', subject);
    const payload = encodePayload(data, this.#maxPayloadBytes, options.json);
    const msgId = options.msgId ?? randomUUID();
    this.#forgetExpiredIds();
    if (this.#seen.has(msgId)) return;
    this.#seen.set(msgId, this.#now());
    this.#log.push({ seq: this.#nextSeq++, subject, msgId, payload });
    this.#logBytes += sizeOf(this.#log.at(-1)!);
    this.#trimLog();
    for (const wake of this.#wakers) wake();
  }

  subscribe(
    pattern: string,
    handler: (message: BusMessage) => Promise<void>,
    options: { durable?: string } = {},
  ): Promise<Subscription> {
    return asPromise(() => {
      assertEventSubject('pattern', pattern);
      let cursor: Cursor;
      if (options.durable === undefined) {
        cursor = { nextSeq: this.#nextSeq, active: false, pattern, consumer: 'ephemeral' };
        this.#ephemerals.add(cursor);
      } else cursor = this.#claimDurable(options.durable, pattern);
      return this.#run(cursor, 1, async ([message]) => {
        if (message) await handler(message);
      });
    });
  }

  consumeBatches(
    pattern: string,
    durable: string,
    options: BatchOptions,
    handler: BatchHandler,
  ): Promise<Subscription> {
    return asPromise(() => {
      assertEventSubject('pattern', pattern);
      return this.#run(this.#claimDurable(durable, pattern), Math.max(1, options.batchSize), handler);
    });
  }

  /** Stops taking messages, lets every subscriber deliver what was already appended, then ends. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const wake of this.#wakers) wake();
    await Promise.all(this.#loops);
  }

  healthy(): boolean {
    return !this.#closing;
  }

  redeliverableForMs(): Promise<number | null> {
    return Promise.resolve(0);
  }

  #claimDurable(durable: string, pattern: string): Cursor {
    assertName('durable', durable);
    const existing = this.#durables.get(durable);
    if (existing && existing.pattern !== pattern) {
      throw new SvcError(
        'SVC-SYS-9008',
        `durable '${durable}' already follows ${existing.pattern}`,
        { durable, pattern },
        [{ field: 'durable', description: `already used for ${existing.pattern}` }],
      );
    }
    if (existing?.active)
      throw new SvcError('SVC-SYS-9008', `durable '${durable}' already has a subscriber in this process`, { durable });
    // A new durable starts at the oldest retained message, as a JetStream durable with deliver-all does.
    const cursor = existing ?? {
      nextSeq: this.#log[0]?.seq ?? this.#nextSeq,
      active: false,
      pattern,
      consumer: durable,
    };
    cursor.active = true;
    this.#durables.set(durable, cursor);
    return cursor;
  }

  /**
   * Hands batches over as the NATS bus does: the next one once the handler says this one is
   * applied (or once it is done), so one batch's commit overlaps the next one's work. Two
   * positions: `read`, where the next batch starts, runs ahead of the durable's cursor, which
   * moves past a batch only once it and every batch before it are settled, so a subscriber that
   * stops resumes from the first message not settled.
   */
  #run(cursor: Cursor, batchSize: number, deliver: BatchHandler): Subscription {
    let stopped = false;
    let wake: () => void = () => undefined;
    const waker = (): void => wake();
    this.#wakers.add(waker);
    const loop = (async () => {
      let read = cursor.nextSeq;
      let delivering: Promise<void> = Promise.resolve();
      /** Set once a batch was released unsettled (the subscriber stopped): nothing after it counts. */
      let halted = false;
      let inFlight = 0;
      while (!stopped && !halted) {
        const batch = this.#pending(read, cursor.pattern, batchSize);
        const last = batch.at(-1);
        if (last === undefined) {
          if (inFlight > 0) {
            // The cursor may not pass what is still being delivered: wait, then look again.
            await delivering;
            continue;
          }
          // Nothing up to the end of the log matches: later scans can start from there.
          cursor.nextSeq = read = this.#nextSeq;
          this.#dropPassed();
          if (this.#closing) break;
          await new Promise<void>((resolve) => (wake = resolve));
          continue;
        }
        const held = this.#hold(batch, cursor.consumer);
        const applied = Promise.withResolvers<void>();
        const previous = delivering;
        inFlight++;
        const delivery = deliverInOrder(held, deliver, this.#retry, this.#logger, () => stopped, {
          previous,
          applied: () => applied.resolve(),
        }).then(async (settled) => {
          await previous;
          inFlight--;
          if (halted) return;
          cursor.nextSeq = settled < held.length ? held[settled]!.seq : last.seq + 1;
          halted = settled < held.length;
        });
        delivering = delivery;
        read = last.seq + 1;
        await Promise.race([applied.promise, delivery]);
      }
      await delivering;
    })().finally(() => {
      cursor.active = false;
      this.#ephemerals.delete(cursor);
      this.#wakers.delete(waker);
      this.#loops.delete(loop);
    });
    this.#loops.add(loop);
    return {
      unsubscribe: async () => {
        stopped = true;
        wake();
        await loop;
      },
    };
  }

  /** The messages as delivered; one whose payload does not decode is set aside here and left out. */
  #hold(batch: readonly StoredMessage[], consumer: string): Held[] {
    const held: Held[] = [];
    for (const stored of batch) {
      let data: unknown;
      try {
        data = decodePayload(stored.payload);
      } catch {
        setAsideAt(stored, consumer, this.#poison, 'undecodable', 'payload is not JSON');
        continue;
      }
      held.push(new LoggedMessage(stored, consumer, data, this.#poison));
    }
    return held;
  }

  #pending(fromSeq: number, pattern: string, max: number): StoredMessage[] {
    const out: StoredMessage[] = [];
    const base = this.#log[0]?.seq ?? this.#nextSeq;
    const matches = subjectMatcher(pattern);
    for (let i = Math.max(0, fromSeq - base); i < this.#log.length && out.length < max; i++) {
      const message = this.#log[i];
      if (message && matches(message.subject)) out.push(message);
    }
    return out;
  }

  #forgetExpiredIds(): void {
    const horizon = this.#now() - this.#duplicateWindowMs;
    for (const [id, at] of this.#seen) {
      if (at > horizon && this.#seen.size < this.#duplicateWindowSize) break;
      this.#seen.delete(id);
    }
  }

  #trimLog(): void {
    this.#dropPassed();
    // Beyond the bounds the oldest go, read or not, as the event stream's discard-old does. In
    // slices, so the append path stays amortised O(1).
    const excess = this.#log.length - this.#maxMessages;
    if (excess > Math.max(1, this.#maxMessages / 10)) this.#discard(excess, 'max_messages');
    if (this.#logBytes <= this.#maxBytes) return;
    let bytes = this.#logBytes;
    let count = 0;
    while (count < this.#log.length && bytes > this.#maxBytes * 0.9) bytes -= sizeOf(this.#log[count++]!);
    this.#discard(count, 'max_bytes');
  }

  /** Drops the oldest `count` at a bound, reporting those a subscriber following them had not read. */
  #discard(count: number, bound: DiscardBound): void {
    const unread = new Map<string, number>();
    for (const cursor of [...this.#durables.values(), ...this.#ephemerals]) {
      let missed = 0;
      for (let i = 0; i < count; i++) {
        const message = this.#log[i]!;
        if (cursor.nextSeq <= message.seq && subjectMatches(cursor.pattern, message.subject)) missed++;
      }
      if (missed > 0) unread.set(cursor.consumer, (unread.get(cursor.consumer) ?? 0) + missed);
    }
    for (const [consumer, missed] of unread) this.#discards.report(consumer, bound, missed);
    this.#drop(count);
  }

  /**
   * Drops from the front what is done with: messages that some durable follows and every
   * subscriber following their subject has passed. A message no durable follows yet stays for
   * one made later (the processor makes its durables one after the other), up to the bounds.
   */
  #dropPassed(): void {
    let count = 0;
    for (const message of this.#log) {
      let followed = false;
      for (const cursor of this.#durables.values()) {
        if (!subjectMatches(cursor.pattern, message.subject)) continue;
        if (cursor.nextSeq <= message.seq) return this.#drop(count);
        followed = true;
      }
      if (!followed) break;
      for (const cursor of this.#ephemerals)
        if (cursor.nextSeq <= message.seq && subjectMatches(cursor.pattern, message.subject)) return this.#drop(count);
      count++;
    }
    this.#drop(count);
  }

  #drop(count: number): void {
    if (count === 0) return;
    for (const message of this.#log.splice(0, count)) this.#logBytes -= sizeOf(message);
  }
}

function sizeOf(message: StoredMessage): number {
  return message.payload.byteLength + message.subject.length + message.msgId.length;
}
