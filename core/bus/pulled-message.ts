import type { JsMsg } from 'nats';
import { ackPosition } from './ack-position.ts';
import type { Held } from './batch-delivery.ts';
import type { PoisonReason } from './poison.ts';

/** What the messages of one delivery share: how each is settled. */
export interface PullDelivery {
  /** Not yet settled: told to the server as still in progress while the delivery runs. */
  readonly unsettled: Set<JsMsg>;
  setAside(msg: JsMsg, reason: PoisonReason, detail: string): Promise<void>;
  handBack(msg: JsMsg): void;
}

/**
 * The client's message keeps its reply subject (which it acks to) without naming it in its type;
 * when it no longer does, the position is read through `info` as before.
 */
function replyOf(msg: JsMsg): string {
  const { reply } = msg as JsMsg & { reply?: unknown };
  return typeof reply === 'string' ? reply : '';
}

/**
 * A pulled message as the bus holds it until it is settled. Its settling is on the prototype, not
 * in closures made for each message: a batch is held until its commit is durable, and three
 * closures (with their context) per message were most of what the bus itself kept meanwhile.
 */
export class PulledMessage implements Held {
  readonly subject: string;
  readonly msgId: string;
  readonly seq: number;
  readonly data: unknown;
  readonly firstAttempt: number;
  readonly #msg: JsMsg;
  readonly #delivery: PullDelivery;

  constructor(msg: JsMsg, msgId: string, data: unknown, delivery: PullDelivery) {
    const position = ackPosition(replyOf(msg)) ?? { seq: msg.seq, deliveryCount: msg.info.deliveryCount };
    this.subject = msg.subject;
    this.msgId = msgId;
    this.seq = position.seq;
    this.data = data;
    this.firstAttempt = position.deliveryCount;
    this.#msg = msg;
    this.#delivery = delivery;
    delivery.unsettled.add(msg);
  }

  ack(): void {
    this.#delivery.unsettled.delete(this.#msg);
    this.#msg.ack();
  }

  setAside(reason: PoisonReason, detail: string): Promise<void> {
    this.#delivery.unsettled.delete(this.#msg);
    return this.#delivery.setAside(this.#msg, reason, detail);
  }

  release(): void {
    this.#delivery.unsettled.delete(this.#msg);
    this.#delivery.handBack(this.#msg);
  }
}
