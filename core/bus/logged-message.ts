import type { Held } from './batch-delivery.ts';
import type { PoisonMessages, PoisonReason } from './poison.ts';

/** Where a message of the in-memory log is. */
export interface LogPosition {
  readonly seq: number;
  readonly subject: string;
  readonly msgId: string;
}

/**
 * A message of the in-memory log as its subscriber holds it until the batch is settled: one object,
 * its settling on the prototype, not closures made for each message (a batch is held until its
 * commit is durable). Acknowledging and releasing do nothing: the cursor moves past what was settled
 * once the batch is done.
 */
export class LoggedMessage implements Held {
  readonly subject: string;
  readonly msgId: string;
  readonly seq: number;
  readonly data: unknown;
  readonly firstAttempt = 1;
  readonly #consumer: string;
  readonly #poison: PoisonMessages;

  constructor(at: LogPosition, consumer: string, data: unknown, poison: PoisonMessages) {
    this.subject = at.subject;
    this.msgId = at.msgId;
    this.seq = at.seq;
    this.data = data;
    this.#consumer = consumer;
    this.#poison = poison;
  }

  ack(): void {}

  release(): void {}

  setAside(reason: PoisonReason, detail: string): Promise<void> {
    setAsideAt(this, this.#consumer, this.#poison, reason, detail);
    return Promise.resolve();
  }
}

/** Reports a message of the log set aside (the log keeps it; its subscriber moves past it). */
export function setAsideAt(
  at: LogPosition,
  consumer: string,
  poison: PoisonMessages,
  reason: PoisonReason,
  detail: string,
): void {
  poison.report({ consumer, subject: at.subject, seq: at.seq, msgId: at.msgId, reason, detail });
}
