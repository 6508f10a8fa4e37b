import { SvcError } from '../errors/index.ts';
import { asPromise } from './as-promise.ts';
import type { BusLogger } from './bus.ts';
import { InFlightLimit } from './in-flight-limit.ts';
import { failedReply, runReplyHandler, type ReplyEnvelope } from './reply-envelope.ts';
import { throttledWarn } from './throttled-warn.ts';

/**
 * Requests one reply subscription, or signals one signal subscription, handles at once: per
 * tenant, and in all (docs/nats.md). The same on NATS and in process.
 */
export const REPLY_LIMITS = { perTenant: 64, total: 1024 };

export type ReplyLimits = typeof REPLY_LIMITS;

/** The tenant of `svc.<tenant>.…`, or '' for a subject outside the family. */
export function subjectTenant(subject: string): string {
  const [family, tenant] = subject.split('.', 2);
  return family === 'svc' ? (tenant ?? '') : '';
}

/**
 * The handlers one reply or signal subscription runs at once, each in a slot of its subject's
 * tenant: a flood of one tenant's messages neither grows pending work without end nor takes every
 * slot from the other tenants.
 */
export class HandlerSlots {
  readonly #limits: ReplyLimits;
  readonly #inFlight: InFlightLimit;
  readonly #logger: BusLogger;
  readonly #warnDropped: ReturnType<typeof throttledWarn>;
  readonly #dropped: () => void;

  constructor(logger: BusLogger, limits: ReplyLimits, dropped: () => void = () => undefined) {
    this.#limits = limits;
    this.#inFlight = new InFlightLimit({ perKey: limits.perTenant, total: limits.total });
    this.#logger = logger;
    this.#warnDropped = throttledWarn(logger, 'signals dropped: too many handlers in flight');
    this.#dropped = dropped;
  }

  /** The handler's reply, or at once SVC-SYS-9001 with no slot free: the requester retries later. */
  reply(subject: string, handle: () => Promise<unknown>): Promise<ReplyEnvelope> {
    const tenant = subjectTenant(subject);
    if (!this.#inFlight.enter(tenant)) return Promise.resolve(failedReply(this.#busy(subject)));
    return runReplyHandler(handle).finally(() => this.#inFlight.leave(tenant));
  }

  /**
   * Runs a signal's handler; with no slot free the signal is dropped, as if sent while nobody
   * listened (signals are not stored), with a warning at most every ten seconds.
   */
  signal(pattern: string, subject: string, handle: () => void | Promise<void>): void {
    const tenant = subjectTenant(subject);
    if (!this.#inFlight.enter(tenant)) {
      this.#dropped();
      return this.#warnDropped({ pattern, tenant });
    }
    void asPromise(handle)
      .catch((failure: unknown) => this.#logger.error({ err: failure, subject }, 'signal handler failed'))
      .finally(() => this.#inFlight.leave(tenant));
  }

  #busy(subject: string): SvcError {
    return new SvcError('SVC-SYS-9001', `too many requests in flight on ${subject}; retry later`, {
      subject,
      per_tenant_limit: this.#limits.perTenant,
      total_limit: this.#limits.total,
    });
  }
}
