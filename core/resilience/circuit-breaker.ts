import { z } from 'zod';
import { isSvcError, parseOrThrow, SvcError } from '../errors/index.ts';

export const circuitStates = ['CLOSED', 'OPEN', 'HALF_OPEN'] as const;
export type CircuitState = (typeof circuitStates)[number];

/** Defaults are spec 3.5: 5 failures in 10 s open, 30 s later half-open, 3 successes close. */
export const circuitBreakerOptionsSchema = z.object({
  /** Names the downstream in errors and metrics (`control-plane`, `checkpoint-store`). */
  name: z.string().min(1),
  failureThreshold: z.number().int().positive().default(5),
  failureWindowMs: z.number().int().positive().default(10_000),
  openDurationMs: z.number().int().positive().default(30_000),
  successThreshold: z.number().int().positive().default(3),
});
export type CircuitBreakerOptions = z.input<typeof circuitBreakerOptionsSchema>;

export interface CircuitBreakerDeps {
  now?: () => number;
  onStateChange?: (to: CircuitState, from: CircuitState) => void;
  /**
   * Whether an error means the downstream is failing. By default a terminal SvcError (a denial, a
   * validation error) is an answer, not a failure; everything else counts.
   */
  isFailure?: (error: unknown) => boolean;
}

function defaultIsFailure(error: unknown): boolean {
  return !isSvcError(error) || error.spec.retryable;
}

/**
 * A service-to-service circuit breaker (spec 3.5). Results of calls that started before the last
 * state change are ignored, so a slow failure from before an opening cannot re-open a recovering
 * circuit, nor can a slow success close one.
 */
export class CircuitBreaker {
  readonly #options: z.output<typeof circuitBreakerOptionsSchema>;
  readonly #now: () => number;
  readonly #onStateChange: (to: CircuitState, from: CircuitState) => void;
  readonly #isFailure: (error: unknown) => boolean;
  #state: CircuitState = 'CLOSED';
  #generation = 0;
  #failures: number[] = [];
  #openedAt = 0;
  #successes = 0;
  #probes = 0;

  constructor(options: CircuitBreakerOptions, deps: CircuitBreakerDeps = {}) {
    this.#options = parseOrThrow(circuitBreakerOptionsSchema, options, 'circuit breaker options');
    this.#now = deps.now ?? Date.now;
    this.#onStateChange = deps.onStateChange ?? (() => undefined);
    this.#isFailure = deps.isFailure ?? defaultIsFailure;
  }

  /** The current state; an OPEN circuit whose open time has passed reads as HALF_OPEN. */
  get state(): CircuitState {
    if (this.#state === 'OPEN' && this.#now() - this.#openedAt >= this.#options.openDurationMs)
      this.#transition('HALF_OPEN');
    return this.#state;
  }

  /** Runs `call` unless the circuit is open; rejects with SVC-SYS-9001 without calling when it is. */
  async execute<T>(call: () => Promise<T>): Promise<T> {
    const state = this.state;
    // Half-open lets as many probes through as it needs successes to close; the rest fail fast.
    if (state === 'OPEN' || (state === 'HALF_OPEN' && this.#probes >= this.#options.successThreshold)) {
      const retryAfterMs = Math.max(0, this.#openedAt + this.#options.openDurationMs - this.#now());
      throw new SvcError('SVC-SYS-9001', `${this.#options.name} is unavailable (circuit ${state})`, {
        circuit: this.#options.name,
        state,
        retry_after_ms: retryAfterMs,
      });
    }
    const generation = this.#generation;
    if (state === 'HALF_OPEN') this.#probes++;
    try {
      const result = await call();
      if (generation === this.#generation) this.#recordSuccess();
      return result;
    } catch (error) {
      if (generation === this.#generation && this.#isFailure(error)) this.#recordFailure();
      else if (generation === this.#generation) this.#recordSuccess();
      throw error;
    } finally {
      if (state === 'HALF_OPEN' && generation === this.#generation) this.#probes--;
    }
  }

  #recordSuccess(): void {
    if (this.#state !== 'HALF_OPEN') return;
    this.#successes++;
    if (this.#successes >= this.#options.successThreshold) this.#transition('CLOSED');
  }

  #recordFailure(): void {
    const now = this.#now();
    if (this.#state === 'HALF_OPEN') return this.#transition('OPEN');
    this.#failures = this.#failures.filter((at) => now - at < this.#options.failureWindowMs);
    this.#failures.push(now);
    if (this.#failures.length >= this.#options.failureThreshold) this.#transition('OPEN');
  }

  #transition(to: CircuitState): void {
    const from = this.#state;
    this.#state = to;
    this.#generation++;
    this.#failures = [];
    this.#successes = 0;
    this.#probes = 0;
    if (to === 'OPEN') this.#openedAt = this.#now();
    this.#onStateChange(to, from);
  }
}
