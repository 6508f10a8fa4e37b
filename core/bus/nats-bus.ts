import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  nanos,
  type Consumer,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from 'nats';
import { z } from 'zod';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import { asPromise } from './as-promise.ts';
import type { BatchOptions, Bus, BusLogger, BusMessage, Subscription } from './bus.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertEventSubject, assertName } from './names.ts';
import type { NatsLink } from './nats-connection.ts';
import { deliverWithRetries, type RetryPolicy } from './retry-delivery.ts';
import { ensureStream, natsStreamOptionsSchema } from './nats-stream.ts';

export const natsBusOptionsSchema = z.object({
  stream: natsStreamOptionsSchema.default(natsStreamOptionsSchema.parse({})),
  /** Create or update the stream at start; off for proxies, whose credentials may only publish. */
  manageStream: z.boolean().default(true),
  /** How long `publish` waits for the JetStream ack before failing with SVC-EVT-4001. */
  publishTimeoutMs: z.number().int().positive().default(5_000),
  /** Time a delivered message may stay unacknowledged before JetStream redelivers it. */
  ackWaitMs: z.number().int().positive().default(30_000),
  maxAckPending: z.number().int().positive().default(1_000),
  /** Delivery attempts before a message is terminated and logged. */
  maxDeliver: z.number().int().positive().default(5),
  /** Backoff before retrying a rejected message (or batch); doubles per attempt up to the cap. */
  retryBackoffMs: z.number().int().positive().default(500),
  maxRetryBackoffMs: z.number().int().positive().default(8_000),
  /**
   * Messages pulled per request by `subscribe`. Pulled messages wait their turn under the ack
   * wait, so a pull should be handled well within `ackWaitMs`.
   */
  fetchBatch: z.number().int().positive().default(20),
});
export type NatsBusOptions = z.input<typeof natsBusOptionsSchema>;
type Options = z.output<typeof natsBusOptionsSchema>;

/** The shortest pull expiry the client accepts. */
const MIN_FETCH_EXPIRES_MS = 1_000;

/** `retries` adds the in-place retries to the server's delivery count. */
function toBusMessage(msg: JsMsg, retries: number): BusMessage {
  return {
    subject: msg.subject,
    data: decodePayload(msg.data),
    msgId: msg.headers?.get('Nats-Msg-Id') ?? `${msg.info.stream}:${msg.seq}`,
    deliveryCount: msg.info.redeliveryCount + retries,
  };
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

  private constructor(link: NatsLink, jsm: JetStreamManager, options: Options, logger: BusLogger) {
    this.#link = link;
    this.#js = link.nc.jetstream();
    this.#jsm = jsm;
    this.#options = options;
    this.#logger = logger;
    this.#retry = {
      maxDeliver: options.maxDeliver,
      backoffMs: options.retryBackoffMs,
      maxBackoffMs: options.maxRetryBackoffMs,
    };
  }

  static async open(link: NatsLink, input: NatsBusOptions, logger: BusLogger): Promise<NatsBus> {
    const options = parseOrThrow(natsBusOptionsSchema, input, 'NATS bus options');
    const jsm = await link.nc.jetstreamManager({ checkAPI: false });
    if (options.manageStream) {
      await ensureStream(jsm, options.stream).catch((error: unknown) => {
        throw new SvcError('SVC-SYS-9001', `cannot set up stream ${options.stream.name}: ${(error as Error).message}`, {
          stream: options.stream.name,
        });
      });
    }
    return new NatsBus(link, jsm, options, logger);
  }

  async publish(subject: string, data: unknown, options: { msgId?: string } = {}): Promise<void> {
    assertEventSubject('subject', subject);
    const payload = encodePayload(data, this.#link.nc.info?.max_payload);
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
    return this.#consume(
      pattern,
      options.durable,
      this.#options.fetchBatch,
      MIN_FETCH_EXPIRES_MS,
      async (pulled, stopped) => {
        for await (const msg of pulled) {
          if (stopped()) msg.nak();
          else await this.#settle([msg], stopped, (retries) => handler(toBusMessage(msg, retries)));
        }
      },
    );
  }

  /**
   * A pull stays open up to its expiry (at least 1 s, the client's minimum), but a batch is handed
   * over as soon as it is full or `maxWaitMs` after its first message, and the rest of the pull
   * forms the next batch: a lone event waits milliseconds, not the pull's expiry.
   */
  consumeBatches(
    pattern: string,
    durable: string,
    options: BatchOptions,
    handler: (messages: BusMessage[]) => Promise<void>,
  ): Promise<Subscription> {
    const batchSize = Math.max(1, options.batchSize);
    const expires = Math.max(MIN_FETCH_EXPIRES_MS, options.maxWaitMs);
    const deliver = async (messages: JsMsg[], stopped: () => boolean): Promise<void> => {
      if (stopped()) for (const msg of messages) msg.nak();
      else
        await this.#settle(messages, stopped, (retries) => handler(messages.map((msg) => toBusMessage(msg, retries))));
    };
    return this.#consume(pattern, durable, batchSize, expires, async (pulled, stopped) => {
      const iterator = pulled[Symbol.asyncIterator]();
      let next = iterator.next();
      for (;;) {
        const first = await next;
        if (first.done === true) return;
        const batch: JsMsg[] = [first.value];
        next = iterator.next();
        const deadline = Date.now() + options.maxWaitMs;
        let ended = false;
        while (batch.length < batchSize) {
          const result = await within(next, deadline - Date.now());
          if (result === undefined) break;
          if (result.done === true) {
            ended = true;
            break;
          }
          batch.push(result.value);
          next = iterator.next();
        }
        await deliver(batch, stopped);
        if (ended) return;
      }
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.#stops].map((stop) => stop()));
  }

  healthy(): boolean {
    return this.#link.healthy();
  }

  /**
   * Delivers with in-place retries, then acknowledges: ack when handled, term when given up (the
   * server must not bring it back), nak when the subscriber stopped meanwhile (the next one gets it).
   */
  async #settle(messages: JsMsg[], stopped: () => boolean, attempt: (retries: number) => Promise<void>): Promise<void> {
    const [first] = messages;
    if (!first) return;
    const context = { subject: first.subject, seqs: messages.map((m) => m.seq) };
    const delivered = first.info.redeliveryCount;
    const outcome = await deliverWithRetries(this.#retry, this.#logger, context, delivered, stopped, (count) => {
      // Retrying takes time the server would otherwise count against the ack wait.
      for (const msg of messages) msg.working();
      return attempt(count - delivered);
    });
    for (const msg of messages) {
      if (outcome === 'delivered') msg.ack();
      else if (outcome === 'gave-up') msg.term();
      else msg.nak();
    }
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
   * Creates the consumer and runs the pull loop: `handle` gets each pull's messages and returns
   * whether to wait the redelivery delay before pulling again.
   */
  async #consume(
    pattern: string,
    durable: string | undefined,
    batchSize: number,
    expiresMs: number,
    handle: (pulled: AsyncIterable<JsMsg>, stopped: () => boolean) => Promise<void>,
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
      max_deliver: this.#options.maxDeliver,
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

    let stopped = false;
    const isStopped = (): boolean => stopped;
    const loop = (async () => {
      while (!stopped) {
        try {
          // After a failed pull the consumer is set up again: it may have been deleted meanwhile.
          consumer ??= await setup();
          const pulled = await consumer.fetch({ max_messages: batchSize, expires: expiresMs });
          await handle(pulled, isStopped);
        } catch (error) {
          if (stopped) break;
          consumer = undefined;
          this.#logger.warn({ err: error, consumer: name }, 'pull from JetStream failed; retrying');
          await sleep(MIN_FETCH_EXPIRES_MS);
        }
      }
    })();
    // Unsubscribing lets the open pull run out (at most its expiry), handing back what it brings.
    const stop = async (): Promise<void> => {
      stopped = true;
      await loop;
      this.#stops.delete(stop);
      if (durable === undefined) await this.#jsm.consumers.delete(stream, name).catch(() => undefined);
    };
    this.#stops.add(stop);
    return { unsubscribe: stop };
  }
}

/** The promise's result if it settles within `ms`, else undefined (the promise stays usable). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  if (ms <= 0) return Promise.race([promise, Promise.resolve(undefined)]);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
