import { setTimeout as sleep } from 'node:timers/promises';
import type { BusLogger } from './bus.ts';

export interface RetryPolicy {
  /** Delivery attempts before the message is given up and set aside. */
  maxDeliver: number;
  /** Backoff before attempt n+1 is `backoffMs × 2^(n-1)`, at most `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
}

export type DeliveryOutcome =
  { outcome: 'delivered' } | { outcome: 'gave-up'; error: unknown } | { outcome: 'stopped' };

/**
 * Hands a message (or batch) to its handler until it resolves, retrying in place with backoff.
 * Retrying in place, rather than putting the message back, is what keeps delivery ordered: the
 * subscriber never moves past a message it has not acknowledged.
 */
export async function deliverWithRetries(
  policy: RetryPolicy,
  logger: BusLogger,
  context: Record<string, unknown>,
  firstAttempt: number,
  stopped: () => boolean,
  attempt: (deliveryCount: number) => Promise<void>,
): Promise<DeliveryOutcome> {
  for (let count = firstAttempt; ; count++) {
    try {
      await attempt(count);
      return { outcome: 'delivered' };
    } catch (error) {
      if (count >= policy.maxDeliver) {
        logger.warn({ ...context, err: error, attempts: count }, 'bus handler kept failing; message set aside');
        return { outcome: 'gave-up', error };
      }
      logger.warn({ ...context, err: error, attempt: count }, 'bus handler failed; redelivering');
      await sleep(Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** (count - firstAttempt)));
      if (stopped()) return { outcome: 'stopped' };
    }
  }
}
