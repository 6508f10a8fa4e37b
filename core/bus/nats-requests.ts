import type { Msg, NatsConnection } from 'nats';
import { asPromise } from './as-promise.ts';
import type { BusLogger, RequestReply, SignalOptions, Signals, Subscription } from './bus.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertPattern, assertSubject } from './names.ts';
import { noResponder, unwrapReply } from './reply-envelope.ts';
import { HandlerSlots, REPLY_LIMITS, subjectTenant, type ReplyLimits } from './reply-limits.ts';

/** Repliers of one subject share a queue group, so each request is answered once. */
const REPLY_QUEUE = 'svc-replies';

/**
 * Whether a message was delivered by a JetStream consumer (its reply is an ack subject). A request
 * or a signal never is: nats-server lets a client with the right to create a push consumer name
 * any deliver subject, without checking that it may publish there, so such a delivery can land
 * on another tenant's signal or request subject. It is ignored.
 */
function deliveredByStream(msg: Msg): boolean {
  return msg.reply?.startsWith('$JS.ACK.') === true;
}

/**
 * Whether a request's reply subject is a requester's inbox: `_INBOX.…`, or, for a request on
 * `svc.<tenant>.…`, that tenant's `_INBOX_<tenant>.…`. nats-server does not check a reply subject
 * against its sender's rights, and the answer is published with this process's own (the control
 * plane's reach everything): a request whose reply named `$JS.API.STREAM.PURGE.SVC_EVENTS`, a
 * `$KV.` key or another tenant's subject would have this process write there for the requester.
 */
export function isRequesterInbox(subject: string, reply: string | undefined): boolean {
  if (reply === undefined) return false;
  if (reply.startsWith('_INBOX.')) return true;
  const tenant = subjectTenant(subject);
  return tenant !== '' && reply.startsWith(`_INBOX_${tenant}.`);
}

function subscription(unsubscribe: () => void): Subscription {
  return { unsubscribe: () => asPromise(unsubscribe) };
}

/** Request-reply and fire-and-forget signals over core NATS subjects (not stored). */
export class NatsRequests implements RequestReply, Signals {
  readonly #nc: NatsConnection;
  readonly #logger: BusLogger;
  readonly #limits: ReplyLimits;

  constructor(nc: NatsConnection, logger: BusLogger, limits = REPLY_LIMITS) {
    this.#nc = nc;
    this.#logger = logger;
    this.#limits = limits;
  }

  async request(subject: string, data: unknown, timeoutMs: number): Promise<unknown> {
    const payload = await asPromise(() => {
      assertSubject(subject);
      return encodePayload(data);
    });
    let reply: Uint8Array;
    try {
      reply = (await this.#nc.request(subject, payload, { timeout: timeoutMs })).data;
    } catch {
      // No responders, timeout and a dropped connection all mean the same to the caller: retry later.
      throw noResponder(subject, timeoutMs);
    }
    return unwrapReply(subject, decodePayload(reply));
  }

  reply(subject: string, handler: (data: unknown, subject: string) => Promise<unknown>): Promise<Subscription> {
    return asPromise(() => {
      assertPattern(subject);
      const slots = new HandlerSlots(this.#logger, this.#limits);
      const sub = this.#nc.subscribe(subject, {
        queue: REPLY_QUEUE,
        callback: (error, msg) => {
          if (error) return this.#logger.error({ err: error, subject }, 'reply subscription failed');
          if (deliveredByStream(msg))
            return this.#logger.warn({ subject: msg.subject }, 'request delivered by a stream consumer; ignored');
          // Nothing is done for a request whose answer could not go to its sender: a lease granted
          // to nobody would hold back its budget.
          if (!isRequesterInbox(msg.subject, msg.reply))
            return this.#logger.warn(
              { subject: msg.subject, reply: msg.reply },
              'request whose reply is not an inbox of its tenant; ignored',
            );
          void slots
            .reply(msg.subject, () => handler(decodePayload(msg.data), msg.subject))
            .then((envelope) => msg.respond(encodePayload(envelope)))
            .catch((failure: unknown) => this.#logger.error({ err: failure, subject: msg.subject }, 'reply failed'));
        },
      });
      return subscription(() => sub.unsubscribe());
    });
  }

  publishSignal(subject: string, data: unknown): Promise<void> {
    return asPromise(() => {
      assertSubject(subject);
      this.#nc.publish(subject, encodePayload(data));
    });
  }

  subscribeSignals(
    pattern: string,
    handler: (data: unknown, subject: string) => void | Promise<void>,
    options: SignalOptions = {},
  ): Promise<Subscription> {
    return asPromise(() => {
      assertPattern(pattern);
      const slots = new HandlerSlots(this.#logger, this.#limits, options.dropped);
      const sub = this.#nc.subscribe(pattern, {
        callback: (error, msg) => {
          if (error) return this.#logger.error({ err: error, pattern }, 'signal subscription failed');
          if (deliveredByStream(msg))
            return this.#logger.warn({ subject: msg.subject }, 'signal delivered by a stream consumer; ignored');
          slots.signal(pattern, msg.subject, () => handler(decodePayload(msg.data), msg.subject));
        },
      });
      return subscription(() => sub.unsubscribe());
    });
  }
}
