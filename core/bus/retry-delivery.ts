import { setTimeout as sleep } from 'node:timers/promises';
import { isSvcError } from '../errors/index.ts';
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
 * Whether a handler failed for want of what it needs (its store could not be reached:
 * SVC-SYS-9001), not because of the message. Such a failure uses up none of the message's
 * attempts: whatever the outage lasts, nothing is set aside for it.
 */
export function isOutage(error: unknown): boolean {
  return isSvcError(error) && error.code === 'SVC-SYS-9001';
}

/**
 * Hands a message (or batch) to its handler until it resolves, retrying in place with backoff.
 * Retrying in place, rather than putting the message back, is what keeps delivery ordered: the
 * subscriber never moves past a message it has not acknowledged. An outage is waited out, its
 * retries not counted.
 */
export async function deliverWithRetries(
  policy: RetryPolicy,
  logger: BusLogger,
  context: Record<string, unknown>,
  firstAttempt: number,
  stopped: () => boolean,
  attempt: (deliveryCount: number) => Promise<void>,
): Promise<DeliveryOutcome> {
  let outages = 0;
  for (let count = firstAttempt; ;) {
    try {
      await attempt(count);
      return { outcome: 'delivered' };
    } catch (error) {
      let waits: number;
      if (isOutage(error)) {
        logger.warn({ ...context, err: error, attempt: count }, 'bus handler cannot reach its store; waiting');
        waits = outages++;
      } else if (count >= policy.maxDeliver) {
        logger.warn({ ...context, err: error, attempts: count }, 'bus handler kept failing; message set aside');
        return { outcome: 'gave-up', error };
      } else {
        logger.warn({ ...context, err: error, attempt: count }, 'bus handler failed; redelivering');
        waits = count++ - firstAttempt;
      }
      await sleep(Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** waits));
      if (stopped()) return { outcome: 'stopped' };
    }
  }
}
