import type { BusLogger, BusMessage, SetAside } from './bus.ts';
import { failureDetail, type PoisonReason } from './poison.ts';
import { deliverWithRetries, type RetryPolicy } from './retry-delivery.ts';

/** A received message, decoded, as a bus implementation holds it until it is settled. */
export interface Held {
  readonly subject: string;
  readonly msgId: string;
  readonly seq: number;
  readonly data: unknown;
  /** The delivery count of its first attempt here (the server's redeliveries included). */
  readonly firstAttempt: number;
  ack(): void;
  setAside(reason: PoisonReason, detail: string): Promise<void>;
  /** Hands it back unhandled (the subscriber stopped), for the next subscriber. */
  release(): void;
}

type Handler = (messages: BusMessage[], applied: () => void) => Promise<readonly SetAside[] | void>;

/**
 * How a batch overlaps the one before it: `previous` settles once that batch's delivery is done;
 * `applied` is passed on to the handler, which calls it once the batch's changes are ordered (the
 * next batch may then be handed over while this one becomes durable).
 */
export interface Pipeline {
  previous: Promise<unknown>;
  applied: () => void;
}

const NOT_PIPELINED: Pipeline = { previous: Promise.resolve(), applied: () => undefined };

function toMessage(held: Held, deliveryCount: number): BusMessage {
  return { subject: held.subject, data: held.data, msgId: held.msgId, deliveryCount };
}

/**
 * Acknowledges the handled messages and sets aside the refused ones, in order. The acks are sent
 * without a pause between them when nothing is refused, so the client writes them in one go.
 */
async function settle(
  held: readonly Held[],
  messages: readonly BusMessage[],
  refusals: readonly SetAside[] | void,
): Promise<void> {
  const refused = new Map((refusals ?? []).map((r) => [r.message, r.reason]));
  for (const [i, one] of held.entries()) {
    const reason = refused.get(messages[i]!);
    if (reason === undefined) one.ack();
    else await one.setAside('refused', reason);
  }
}

/**
 * Delivers messages in order and settles each one: acknowledged when handled, set aside when
 * refused or when its handler kept failing, released when the subscriber stopped. A batch is
 * tried whole once; when it fails, its messages are tried one at a time with the retry policy,
 * so that a message that fails alone is set aside alone and the others are handled.
 * With a `pipeline`, the whole batch's attempt may run while the batch before it is still being
 * delivered; anything else (one message alone, the attempts after a failed batch) waits until
 * that batch is done, so that retries keep the stream's order.
 * Returns how many messages, from the first, were settled (the rest were released).
 */
export async function deliverInOrder(
  batch: readonly Held[],
  handler: Handler,
  policy: RetryPolicy,
  logger: BusLogger,
  stopped: () => boolean,
  pipeline: Pipeline = NOT_PIPELINED,
): Promise<number> {
  const held: Held[] = [];
  for (const one of batch) {
    // Attempts used up before it reached this process (crashes while handling it): it goes untried.
    if (one.firstAttempt > policy.maxDeliver)
      await one.setAside('failed', `delivered ${one.firstAttempt - 1} times without being handled`);
    else held.push(one);
  }
  if (held.length > 1) {
    const messages = held.map((one) => toMessage(one, one.firstAttempt));
    try {
      const refusals = await handler(messages, pipeline.applied);
      await settle(held, messages, refusals);
      return batch.length;
    } catch (error) {
      logger.warn(
        { subject: held[0]?.subject, seqs: held.map((one) => one.seq), err: error },
        'bus batch handler failed; handing its messages over one at a time',
      );
    }
  }
  await pipeline.previous;
  for (const [i, one] of held.entries()) {
    const release = (): number => {
      for (const rest of held.slice(i)) rest.release();
      return batch.indexOf(one);
    };
    if (stopped()) return release();
    let message: BusMessage | undefined;
    let refusals: readonly SetAside[] | void = undefined;
    const context = { subject: one.subject, seq: one.seq, msg_id: one.msgId };
    // In a batch that failed, its first attempt was the batch's; still, each gets one alone.
    const first = held.length > 1 ? Math.min(one.firstAttempt + 1, policy.maxDeliver) : one.firstAttempt;
    const result = await deliverWithRetries(policy, logger, context, first, stopped, async (count) => {
      message = toMessage(one, count);
      refusals = await handler([message], () => undefined);
    });
    if (result.outcome === 'stopped') return release();
    if (result.outcome === 'delivered') await settle([one], [message!], refusals);
    else await one.setAside('failed', failureDetail(result.error));
  }
  return batch.length;
}
