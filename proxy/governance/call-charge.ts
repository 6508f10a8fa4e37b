import { ZERO } from '../enforcement/index.ts';
import type { CutoffReason } from '../metrics/index.ts';
import type { PricedUsage } from './call-pricing.ts';
import { cutCall } from './cut-call.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { chargeCall, holdCharge, type Charge, type ChargedCall } from './settle-call.ts';
import type { UpstreamSignal } from './upstream-signal.ts';

/**
 * The one settlement of a call that may have reached its provider: charged exactly once, or
 * withdrawn (nothing generated). Until then its worst case can stand for it provisionally
 * (`holdCharge`), its answer cut or its client gone, so that a process ending first leaves it
 * charged; the charge replaces that record (same event id), a withdrawal drops it.
 */
export class CallCharge {
  readonly call: ChargedCall;
  readonly #deps: GovernanceDeps;
  #held = false;
  #settled = false;

  constructor(deps: GovernanceDeps, call: ChargedCall) {
    this.#deps = deps;
    this.call = call;
  }

  /** Charged, withdrawn, or its charge being made (`settleWhen`): nothing else settles it. */
  get settled(): boolean {
    return this.#settled;
  }

  /** Its worst case stands for it provisionally: its answer was cut, or its client left. */
  get held(): boolean {
    return this.#held;
  }

  /** Has `worst` stand for the call provisionally; one settled or held already needs none. */
  hold(worst: Charge): void {
    if (this.#settled || this.#held) return;
    this.#held = true;
    void holdCharge(this.#deps, this.call, worst);
  }

  /** Cuts the call's answer (`cutCall`), `worst` standing for it until the drain ends. */
  cut(upstream: UpstreamSignal, reason: CutoffReason, message: string, worst: Charge, end: () => void): void {
    this.#held = true;
    cutCall(this.#deps, this.call, upstream, reason, message, worst, end);
  }

  /** Charges the call (`chargeCall`): undefined, and nothing charged, when it is settled already. */
  settle(made: Charge): PricedUsage | undefined {
    if (this.#settled) return undefined;
    this.#settled = true;
    return chargeCall(this.#deps, this.call, made);
  }

  /**
   * Settled from now on, charged once `made` is known: nothing else charges the call meanwhile
   * (its prompt being counted).
   */
  async settleWhen(made: () => Promise<Charge>): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    chargeCall(this.#deps, this.call, await made());
  }

  /** Returns the call's hold to the lease uncharged; a worst case that stood for it is dropped. */
  withdraw(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.call.reservation.settle(ZERO);
    if (this.#held) this.#deps.recorder.withdraw(this.call.eventId);
  }
}
