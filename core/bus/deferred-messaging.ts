import { isSvcError, SvcError } from '../errors/index.ts';
import type { BusLogger, Messaging } from './bus.ts';

export interface DeferredMessagingOptions {
  /** Opens the real messaging; rejected with a retryable SvcError (SVC-SYS-9001) while NATS is away. */
  open: () => Promise<Messaging>;
  logger: BusLogger;
  /** Pause between attempts. */
  retryMs?: number;
  /** A failure that retrying cannot cure (bad configuration): the process should stop. */
  onFatal: (error: unknown) => void;
}

export interface DeferredMessaging extends Messaging {
  /** Resolves once the real messaging is open. */
  readonly ready: Promise<void>;
  /** Resolves once the first attempt to open it has ended, opened or not (never rejects). */
  readonly firstAttempt: Promise<void>;
}

/**
 * Messaging that is usable before NATS can be reached, for a sidecar that must start (and
 * enforce its cached ruleset) during a NATS outage. It keeps opening the real messaging in the
 * background; until that succeeds, publishing rejects with SVC-EVT-4001 (the outbox keeps the
 * event and retries), requests and signals reject with SVC-SYS-9001 (leases fall back to the soft
 * limit), and subscriptions, watches and bucket opens wait for the connection.
 */
export function deferMessaging(options: DeferredMessagingOptions): DeferredMessaging {
  let inner: Messaging | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;
  let firstAttemptEnded = (): void => undefined;
  const firstAttempt = new Promise<void>((resolve) => (firstAttemptEnded = resolve));
  const ready = (async () => {
    for (let attempt = 1; ; attempt++) {
      if (closed) throw new SvcError('SVC-SYS-9001', 'messaging closed before NATS was reached');
      try {
        inner = await options.open();
        if (closed) {
          await inner.close();
          throw new SvcError('SVC-SYS-9001', 'messaging closed before NATS was reached');
        }
        if (attempt > 1) options.logger.warn({ attempts: attempt }, 'NATS reached; messaging open');
        return;
      } catch (error) {
        firstAttemptEnded();
        if (closed) throw error;
        if (!isSvcError(error) || !error.spec.retryable) {
          options.onFatal(error);
          throw error;
        }
        if (attempt === 1)
          options.logger.warn(
            { err: error.message },
            'NATS not reachable at start; serving from local state and retrying',
          );
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, options.retryMs ?? 1000);
        });
      }
    }
  })();
  // Waiters see the failure; nobody else needs to.
  ready.then(firstAttemptEnded, firstAttemptEnded);

  const now = (): Messaging | undefined => inner;
  const later = async (): Promise<Messaging> => {
    await ready;
    return inner!;
  };
  const unreachable = (code: 'SVC-EVT-4001' | 'SVC-SYS-9001') =>
    Promise.reject(new SvcError(code, 'NATS has not been reached yet'));

  return {
    ready,
    firstAttempt,
    bus: {
      publish: (subject, data, publishOptions) =>
        now()?.bus.publish(subject, data, publishOptions) ?? unreachable('SVC-EVT-4001'),
      subscribe: async (pattern, handler, subscribeOptions) =>
        (await later()).bus.subscribe(pattern, handler, subscribeOptions),
      consumeBatches: async (pattern, durable, batchOptions, handler) =>
        (await later()).bus.consumeBatches(pattern, durable, batchOptions, handler),
      // The bus closes with the whole messaging.
      close: () => Promise.resolve(),
      healthy: () => now()?.bus.healthy() ?? false,
      redeliverableForMs: () => now()?.bus.redeliverableForMs() ?? unreachable('SVC-SYS-9001'),
    },
    keyValue: { open: async (bucket) => (await later()).keyValue.open(bucket) },
    requests: {
      request: (subject, data, timeoutMs) =>
        now()?.requests.request(subject, data, timeoutMs) ?? unreachable('SVC-SYS-9001'),
      reply: async (subject, handler) => (await later()).requests.reply(subject, handler),
    },
    signals: {
      publishSignal: (subject, data) => now()?.signals.publishSignal(subject, data) ?? unreachable('SVC-SYS-9001'),
      subscribeSignals: async (pattern, handler, options) =>
        (await later()).signals.subscribeSignals(pattern, handler, options),
    },
    healthy: () => now()?.healthy() ?? false,
    async close() {
      closed = true;
      clearTimeout(timer);
      wake?.();
      await inner?.close();
    },
  };
}
