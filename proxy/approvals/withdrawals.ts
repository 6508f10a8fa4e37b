import { ERROR_CATALOGUE, isSvcError } from '../../core/errors/index.ts';
import type { ApprovalHoldRequest } from '../../core/sync/contract.ts';

export interface WithdrawalOptions {
  /** The wait before the first retry; it doubles after each failed attempt, up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** How long a withdrawal is retried before the approval is left pending. */
  giveUpAfterMs: number;
}

type Logger = { warn(object: Record<string, unknown>, message: string): void };

/**
 * Sends the withdrawals of approvals whose calls ended undecided until the control plane hears
 * them. One sent while NATS or the control plane was away would otherwise leave the approval
 * pending: a reviewer could approve, later, a call that had long been refused.
 *
 * Bounded without a bound of its own: each withdrawal belongs to an approval this proxy opened,
 * and it opens at most `proxy_approval_opens_per_minute` a minute, so at most that many times
 * `giveUpAfterMs` in minutes are retried at once. A refusal that will not change (an approval
 * already decided on a surface, or unknown) ends the retries; so does `close`.
 */
export class Withdrawals {
  readonly #send: (request: ApprovalHoldRequest) => Promise<unknown>;
  readonly #options: WithdrawalOptions;
  readonly #logger: Logger;
  readonly #retries = new Set<NodeJS.Timeout>();
  readonly #attempts = new Set<Promise<void>>();
  #closed = false;

  constructor(send: (request: ApprovalHoldRequest) => Promise<unknown>, options: WithdrawalOptions, logger: Logger) {
    this.#send = send;
    this.#options = options;
    this.#logger = logger;
  }

  /** How many withdrawals wait for a retry now. */
  get pending(): number {
    return this.#retries.size;
  }

  /** Sends `request`, which carries `withdrawn`, until it is heard, refused for good or given up. */
  withdraw(request: ApprovalHoldRequest): void {
    this.#attempt(request, Date.now() + this.#options.giveUpAfterMs, this.#options.firstDelayMs);
  }

  /**
   * Waits for the attempts under way (each bounded by the request's own timeout), so that the
   * withdrawals of the calls a shutdown refused are sent before messaging closes, then drops
   * the retries still waiting, logging each approval left pending.
   */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#attempts.size > 0) await Promise.all(this.#attempts);
    for (const timer of this.#retries) clearTimeout(timer);
    if (this.#retries.size > 0) {
      this.#logger.warn({ withdrawals: this.#retries.size }, 'proxy closing; approvals not yet withdrawn stay pending');
    }
    this.#retries.clear();
  }

  #attempt(request: ApprovalHoldRequest, giveUpAt: number, delayMs: number): void {
    const approvalId = request.approval_id;
    const attempt = this.#send(request).then(
      () => undefined,
      (error: unknown) => {
        if (isSvcError(error) && !ERROR_CATALOGUE[error.code].retryable) {
          this.#logger.warn({ approval_id: approvalId, code: error.code }, 'approval withdrawal refused');
          return;
        }
        if (this.#closed || Date.now() + delayMs > giveUpAt) {
          this.#logger.warn(
            { approval_id: approvalId, err: (error as Error).message },
            'approval of an ended hold could not be withdrawn; it stays pending',
          );
          return;
        }
        const timer = setTimeout(() => {
          this.#retries.delete(timer);
          this.#attempt(request, giveUpAt, Math.min(delayMs * 2, this.#options.maxDelayMs));
        }, delayMs);
        timer.unref();
        this.#retries.add(timer);
      },
    );
    this.#attempts.add(attempt);
    void attempt.finally(() => this.#attempts.delete(attempt));
  }
}
