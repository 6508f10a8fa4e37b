import type { BusLogger, RequestReply, SignalOptions, Signals, Subscription } from './bus.ts';
import { asPromise } from './as-promise.ts';
import { decodePayload, encodePayload } from './codec.ts';
import { assertPattern, assertSubject } from './names.ts';
import { noResponder, unwrapReply } from './reply-envelope.ts';
import { HandlerSlots, REPLY_LIMITS, type ReplyLimits } from './reply-limits.ts';
import { subjectMatches } from './subjects.ts';

type Replier = (payload: Uint8Array, subject: string) => Promise<unknown>;
type Listener = (payload: Uint8Array, subject: string) => void;

/**
 * In-process plain subjects for standalone mode: request-reply and signals. Payloads go through
 * the same JSON codec, reply envelope and handler limits as on NATS, so callers see identical
 * values and errors.
 */
export class MemoryRequests implements RequestReply, Signals {
  readonly #repliers = new Map<symbol, { subject: string; handler: Replier }>();
  readonly #listeners = new Map<symbol, { pattern: string; handler: Listener }>();
  readonly #logger: BusLogger;
  readonly #limits: ReplyLimits;
  /** Round-robin over repliers of one subject, as a NATS queue group spreads requests. */
  #turn = 0;

  constructor(logger: BusLogger, limits = REPLY_LIMITS) {
    this.#logger = logger;
    this.#limits = limits;
  }

  async request(subject: string, data: unknown, timeoutMs: number): Promise<unknown> {
    assertSubject(subject);
    const payload = encodePayload(data);
    const repliers = [...this.#repliers.values()].filter((r) => subjectMatches(r.subject, subject));
    const replier = repliers[this.#turn++ % Math.max(1, repliers.length)];
    if (!replier) throw noResponder(subject, timeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(noResponder(subject, timeoutMs)), timeoutMs);
    });
    try {
      const reply = await Promise.race([replier.handler(payload, subject), timeout]);
      return unwrapReply(subject, reply);
    } finally {
      clearTimeout(timer);
    }
  }

  reply(subject: string, handler: (data: unknown, subject: string) => Promise<unknown>): Promise<Subscription> {
    return asPromise(() => {
      assertPattern(subject);
      const id = Symbol(subject);
      const slots = new HandlerSlots(this.#logger, this.#limits);
      this.#repliers.set(id, {
        subject,
        handler: async (payload, actual) =>
          decodePayload(encodePayload(await slots.reply(actual, () => handler(decodePayload(payload), actual)))),
      });
      return { unsubscribe: () => asPromise(() => void this.#repliers.delete(id)) };
    });
  }

  publishSignal(subject: string, data: unknown): Promise<void> {
    return asPromise(() => {
      assertSubject(subject);
      const payload = encodePayload(data);
      // Fire and forget: the publisher never waits for, nor fails with, a listener.
      for (const listener of this.#listeners.values())
        if (subjectMatches(listener.pattern, subject)) listener.handler(payload, subject);
    });
  }

  subscribeSignals(
    pattern: string,
    handler: (data: unknown, subject: string) => void | Promise<void>,
    options: SignalOptions = {},
  ): Promise<Subscription> {
    return asPromise(() => {
      assertPattern(pattern);
      const id = Symbol(pattern);
      const slots = new HandlerSlots(this.#logger, this.#limits, options.dropped);
      this.#listeners.set(id, {
        pattern,
        handler: (payload, subject) => slots.signal(pattern, subject, () => handler(decodePayload(payload), subject)),
      });
      return { unsubscribe: () => asPromise(() => void this.#listeners.delete(id)) };
    });
  }
}
