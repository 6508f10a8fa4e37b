import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  headers,
  millis,
  nanos,
  type Consumer,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from 'nats';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import { asPromise } from './as-promise.ts';
import { deliverInOrder, type Held, type Pipeline } from './batch-delivery.ts';
import type { BatchHandler, BatchOptions, Bus, BusLogger, BusMessage, PublishOptions, Subscription } from './bus.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { natsMsgId } from './msg-id-header.ts';
import { assertEventSubject, assertName } from './names.ts';
import type { NatsLink } from './nats-connection.ts';
import { cleanDetail, PoisonMessages, type PoisonReason } from './poison.ts';
import { openPull, pullBatches } from './pull-batches.ts';
import { PulledMessage, type PullDelivery } from './pulled-message.ts';
import type { RetryPolicy } from './retry-delivery.ts';
import {
  deadLetterStreamOptionsSchema,
  ensureDeadLetterStream,
  ensureStream,
  natsStreamOptionsSchema,
} from './nats-stream.ts';
import { deadLetterSubject } from './subjects.ts';

export const natsBusOptionsSchema = z.object({
  stream: natsStreamOptionsSchema.default(natsStreamOptionsSchema.parse({})),
  /**
   * Where set-aside messages are copied (subject `deadletter.<original subject>`), so that an
   * operator can inspect and replay them; no consumer of the product reads that stream.
   */
  deadLetters: deadLetterStreamOptionsSchema.default(deadLetterStreamOptionsSchema.parse({})),
  /** Create or update the stream at start; off for proxies, whose credentials may only publish. */
  manageStream: z.boolean().default(true),
  /** How long `publish` waits for the JetStream ack before failing with SVC-EVT-4001. */
  publishTimeoutMs: z.number().int().positive().default(5_000),
  /** Time a delivered message may stay unacknowledged before JetStream redelivers it. */
  ackWaitMs: z.number().int().positive().default(30_000),
  /**
   * Messages a durable consumer may have delivered and unacknowledged, across all the processes
   * sharing it: at least replicas × batch size, or the replicas wait on each other (docs/scaling.md).
   */
  maxAckPending: z.number().int().positive().default(8_192),
  /** Delivery attempts before a message is set aside (terminated, counted, dead-lettered). */
  maxDeliver: z.number().int().positive().default(5),
  /** Backoff before retrying a rejected message (or batch); doubles per attempt up to the cap. */
  retryBackoffMs: z.number().int().positive().default(500),
  maxRetryBackoffMs: z.number().int().positive().default(8_000),
  /**
   * Messages pulled per request by `subscribe`. Pulled messages wait their turn under the ack
   * wait, so a pull should be handled well within `ackWaitMs`.
   */
  fetchBatch: z.number().int().positive().default(20),
  /**
   * How long a pull stays open (at least 1 s, the client's minimum). The client ends a pull on
   * its own timer at 1.05 × its expiry and drops what the server sent on it after that: a message
   * sent just before the server's expiry and read only after an event-loop stall longer than 5 %
   * of the expiry is not seen, and comes back only after the ack wait. At 1 s a 50 ms stall (a
   * commit, a GC on a loaded machine) held such messages back for the ack wait; at 30 s it takes
   * a stall of 1.5 s. A pull ends sooner when it fills, and a stopping subscriber closes it at
   * once; batches are cut by `maxWaitMs`, not by the pull's end.
   */
  pullExpiresMs: z.number().int().min(1_000).default(30_000),
});
export type NatsBusOptions = z.input<typeof natsBusOptionsSchema>;
type Options = z.output<typeof natsBusOptionsSchema>;

/** How long a handed-back message waits before it is delivered again (`handBack`). */
const HAND_BACK_DELAY_MS = 1_000;
/** Wait before pulling again after a failed pull. */
const PULL_RETRY_MS = 1_000;

function msgIdOf(msg: JsMsg): string {
  return natsMsgId(msg) || `${msg.info.stream}:${msg.seq}`;
}

/**
 * The Bus on JetStream: one stream, durable pull consumers with explicit acks.
 * A subscriber handles its messages one at a time and retries a rejected one in place (extending
 * the ack wait meanwhile), so it never moves past an unacknowledged message; a redelivery by the
 * server only happens when a subscriber went away (crash: after the ack wait; unsubscribe: at once).
 */
export class NatsBus implements Bus {
  readonly #link: NatsLink;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #options: Options;
  readonly #logger: BusLogger;
  readonly #stops = new Set<() => Promise<void>>();
  readonly #retry: RetryPolicy;
  readonly #poison: PoisonMessages;

  private constructor(link: NatsLink, jsm: JetStreamManager, options: Options, logger: BusLogger, registry?: Registry) {
    this.#link = link;
    this.#js = link.nc.jetstream();
    this.#jsm = jsm;
    this.#options = options;
    this.#logger = logger;
    this.#poison = new PoisonMessages(logger, registry);
    this.#retry = {
      maxDeliver: options.maxDeliver,
      backoffMs: options.retryBackoffMs,
      maxBackoffMs: options.maxRetryBackoffMs,
    };
  }

  /** `registry` receives `svc_bus_poison_messages_total`. */
  static async open(link: NatsLink, input: NatsBusOptions, logger: BusLogger, registry?: Registry): Promise<NatsBus> {
    const options = parseOrThrow(natsBusOptionsSchema, input, 'NATS bus options');
    const jsm = await link.nc.jetstreamManager({ checkAPI: false });
    if (options.manageStream) {
      const streams: Array<[string, () => Promise<void>]> = [
        [options.stream.name, () => ensureStream(jsm, options.stream, logger)],
      ];
      if (options.deadLetters.enabled)
        streams.push([options.deadLetters.name, () => ensureDeadLetterStream(jsm, options.deadLetters, logger)]);
      for (const [name, ensure] of streams) {
        await ensure().catch((error: unknown) => {
          throw new SvcError('SVC-SYS-9001', `cannot set up stream ${name}: ${(error as Error).message}`, {
            stream: name,
          });
        });
      }
    }
    return new NatsBus(link, jsm, options, logger, registry);
  }

  async publish(subject: string, data: unknown, options: PublishOptions = {}): Promise<void> {
    assertEventSubject('subject', subject);
    const payload = encodePayload(data, this.#link.nc.info?.max_payload, options.json);
    const msgID = options.msgId ?? randomUUID();
    try {
      await this.#js.publish(subject, payload, { msgID, timeout: this.#options.publishTimeoutMs });
    } catch (error) {
      throw new SvcError('SVC-EVT-4001', `event delivery failed on ${subject}: ${(error as Error).message}`, {
        subject,
        msg_id: msgID,
      });
    }
  }

  subscribe(
    pattern: string,
    handler: (message: BusMessage) => Promise<void>,
    options: { durable?: string } = {},
  ): Promise<Subscription> {
    // Each message is handled as it arrives, one at a time, in stream order.
    return this.#consume(pattern, options.durable, async (source, stopping, consumer) => {
      const stopped = (): boolean => stopping.aborted;
      const fetch = { max_messages: this.#options.fetchBatch, expires: this.#options.pullExpiresMs };
      for await (const msg of await openPull(source, fetch, stopping)) {
        if (stopped()) handBack(msg);
        else
          await this.#deliver([msg], consumer, stopped, ([message]) =>
            message ? handler(message) : Promise.resolve(),
          );
      }
    });
  }

  /**
   * A pull stays open up to its expiry, but a batch is handed over as soon as it is full or
   * `maxWaitMs` after its first message, and the rest of the pull forms the next batch: a lone
   * event waits milliseconds, not the pull's expiry.
   */
  consumeBatches(
    pattern: string,
    durable: string,
    options: BatchOptions,
    handler: BatchHandler,
  ): Promise<Subscription> {
    const batchSize = Math.max(1, options.batchSize);
    // The delivery of the last batch handed over: the next one follows once it is applied.
    let delivering: Promise<void> = Promise.resolve();
    const handOver = async (batch: JsMsg[], stopped: () => boolean, consumer: string): Promise<void> => {
      const applied = Promise.withResolvers<void>();
      const pipeline: Pipeline = { previous: delivering, applied: () => applied.resolve() };
      // Nobody may await it any more by the time it fails: what it leaves unsettled comes back
      // after the ack wait, as when a pull fails.
      delivering = this.#deliver(batch, consumer, stopped, handler, pipeline).catch((error: unknown) => {
        this.#logger.warn({ err: error, consumer }, 'delivering a batch failed; its messages come back');
      });
      await Promise.race([applied.promise, delivering]);
    };
    const pull = (source: Consumer, stopping: AbortSignal, consumer: string): Promise<void> => {
      const stopped = (): boolean => stopping.aborted;
      const pullOptions = { batchSize, maxWaitMs: options.maxWaitMs, expiresMs: this.#options.pullExpiresMs };
      return pullBatches(source, pullOptions, stopping, async (batch) => {
        if (stopped()) for (const msg of batch) handBack(msg);
        else await handOver(batch, stopped, consumer);
      });
    };
    return this.#consume(pattern, durable, pull, () => delivering);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#stops].map((stop) => stop()));
  }

  healthy(): boolean {
    return this.#link.healthy();
  }

  async redeliverableForMs(): Promise<number | null> {
    const { max_age: maxAge } = (await this.#jsm.streams.info(this.#options.stream.name)).config;
    // JetStream writes "no limit" as 0.
    return maxAge > 0 ? millis(maxAge) : null;
  }

  /**
   * Decodes each message (one that does not decode is set aside at once), then delivers them in
   * order with in-place retries: ack when handled, set aside when refused or given up (the server
   * must not bring it back), handed back when the subscriber stopped meanwhile (the next one gets it).
   */
  async #deliver(
    messages: JsMsg[],
    consumer: string,
    stopped: () => boolean,
    handler: BatchHandler,
    pipeline?: Pipeline,
  ): Promise<void> {
    const held: Held[] = [];
    // Not yet settled: told to the server as still in progress every third of the ack wait, so a
    // delivery that runs long (a slow commit, retries with backoff) is not redelivered meanwhile,
    // and one that ends in milliseconds, as nearly all do, sends the server nothing extra.
    const unsettled = new Set<JsMsg>();
    const delivery: PullDelivery = {
      unsettled,
      setAside: (msg, reason, detail) => this.#setAside(msg, consumer, reason, detail),
      handBack,
    };
    for (const msg of messages) {
      let data: unknown;
      try {
        data = decodePayload(msg.data);
      } catch {
        await delivery.setAside(msg, 'undecodable', 'payload is not JSON');
        continue;
      }
      held.push(new PulledMessage(msg, msgIdOf(msg), data, delivery));
    }
    const heartbeat = setInterval(() => {
      try {
        for (const msg of unsettled) msg.working();
      } catch (error) {
        // A connection that closed meanwhile refuses the signal; the server redelivers what it lacks.
        this.#logger.warn({ err: error, consumer }, 'could not tell the server a delivery is still running');
      }
    }, this.#options.ackWaitMs / 3);
    try {
      await deliverInOrder(held, handler, this.#retry, this.#logger, stopped, pipeline);
    } finally {
      clearInterval(heartbeat);
    }
  }

  /**
   * Copies the message to the dead-letter stream (when on), then terminates it and reports it.
   * When the copy cannot be written the message is handed back instead, so it is never lost.
   */
  async #setAside(msg: JsMsg, consumer: string, reason: PoisonReason, detail: string): Promise<void> {
    const msgId = msgIdOf(msg);
    const { deadLetters } = this.#options;
    if (deadLetters.enabled) {
      const h = headers();
      h.set('Nats-Msg-Id', `${consumer}:${msg.info.stream}:${msg.seq}`);
      h.set('Svc-Consumer', consumer);
      h.set('Svc-Reason', reason);
      h.set('Svc-Detail', cleanDetail(detail));
      h.set('Svc-Stream-Seq', String(msg.seq));
      h.set('Svc-Msg-Id', cleanDetail(msgId));
      try {
        await this.#js.publish(deadLetterSubject(msg.subject), msg.data, {
          headers: h,
          timeout: this.#options.publishTimeoutMs,
        });
      } catch (error) {
        this.#logger.error(
          { err: error, consumer, subject: msg.subject, seq: msg.seq, msg_id: msgId },
          'dead letter could not be written; message handed back',
        );
        msg.nak(this.#options.retryBackoffMs);
        return;
      }
    }
    msg.term();
    this.#poison.report({ consumer, subject: msg.subject, seq: msg.seq, msgId, reason, detail });
  }

  /**
   * A durable keeps its position across restarts of this process and of the server: an existing
   * one is reused with its limits brought up to date; one bound to another pattern is refused.
   */
  async #ensureDurable(
    stream: string,
    durable: string,
    pattern: string,
    limits: Partial<ConsumerConfig>,
  ): Promise<void> {
    const existing = await this.#jsm.consumers.info(stream, durable).catch(() => undefined);
    if (existing && existing.config.filter_subject !== pattern) {
      throw new SvcError(
        'SVC-SYS-9008',
        `durable '${durable}' already follows ${existing.config.filter_subject ?? 'another pattern'}`,
        { durable, pattern },
        [{ field: 'durable', description: `already used for ${existing.config.filter_subject ?? 'another pattern'}` }],
      );
    }
    const request = existing
      ? this.#jsm.consumers.update(stream, durable, limits)
      : this.#jsm.consumers.add(stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          // A new durable reads everything retained.
          deliver_policy: DeliverPolicy.All,
          filter_subject: pattern,
          ...limits,
        });
    await request.catch((error: unknown) => {
      throw new SvcError(
        'SVC-SYS-9001',
        `cannot set up consumer ${durable} on ${stream}: ${(error as Error).message}`,
        { durable, pattern },
      );
    });
  }

  /**
   * Creates the consumer and runs the pull loop: `pull` pulls once and handles what it brings.
   * Stopping waits for the loop, then for `delivering` (a delivery `pull` left under way).
   */
  async #consume(
    pattern: string,
    durable: string | undefined,
    pull: (consumer: Consumer, stopping: AbortSignal, label: string) => Promise<void>,
    delivering: () => Promise<void> = () => Promise.resolve(),
  ): Promise<Subscription> {
    await asPromise(() => {
      assertEventSubject('pattern', pattern);
      if (durable !== undefined) assertName('durable', durable);
    });
    const stream = this.#options.stream.name;
    const name = durable ?? `eph_${randomUUID().replaceAll('-', '')}`;
    const limits = {
      ack_wait: nanos(this.#options.ackWaitMs),
      max_ack_pending: this.#options.maxAckPending,
      // Unlimited on the server: the subscriber sets a message aside itself after maxDeliver
      // attempts (dead letter included), even one whose attempts crashed this process.
      max_deliver: -1,
    };
    const setup = async (): Promise<Consumer> => {
      if (durable === undefined) {
        await this.#jsm.consumers
          .add(stream, {
            name,
            ack_policy: AckPolicy.Explicit,
            deliver_policy: DeliverPolicy.New,
            filter_subject: pattern,
            inactive_threshold: nanos(60_000),
            ...limits,
          })
          .catch((error: unknown) => {
            throw new SvcError('SVC-SYS-9001', `cannot create consumer on ${stream}: ${(error as Error).message}`, {
              pattern,
            });
          });
      } else {
        await this.#ensureDurable(stream, durable, pattern, limits);
      }
      return this.#js.consumers.get(stream, name);
    };
    let consumer: Consumer | undefined = await setup();

    const stopping = new AbortController();
    const loop = (async () => {
      while (!stopping.signal.aborted) {
        try {
          // After a failed pull the consumer is set up again: it may have been deleted meanwhile.
          consumer ??= await setup();
          // Ephemeral names are random: one label value for all of them keeps the metric bounded.
          await pull(consumer, stopping.signal, durable ?? 'ephemeral');
        } catch (error) {
          if (stopping.signal.aborted) break;
          consumer = undefined;
          this.#logger.warn({ err: error, consumer: name }, 'pull from JetStream failed; retrying');
          await sleep(PULL_RETRY_MS);
        }
      }
    })();
    // Unsubscribing closes the open pull and hands back what it brought but had not delivered.
    const stop = async (): Promise<void> => {
      stopping.abort();
      await loop;
      await delivering();
      this.#stops.delete(stop);
      if (durable === undefined) await this.#jsm.consumers.delete(stream, name).catch(() => undefined);
    };
    this.#stops.add(stop);
    return { unsubscribe: stop };
  }
}

/**
 * Returns a message for redelivery to the next subscriber of the durable. Only a stopping
 * subscriber hands back, after it closed its pull. A nak sent right after that close let
 * nats-server 2.9 hold one message back until the ack wait and deliver another twice; a nak
 * delayed by a second, as before, brings every message back once.
 */
function handBack(msg: JsMsg): void {
  msg.nak(HAND_BACK_DELAY_MS);
}
