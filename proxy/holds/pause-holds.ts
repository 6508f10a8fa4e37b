import type { Signals, Subscription } from '../../core/bus/bus.ts';
import type { SvcCode } from '../../core/errors/index.ts';
import { PauseSignalSchema, syncSubjects } from '../../core/sync/contract.ts';
import type { EnvelopeRegistry, LocalEnvelope } from '../envelopes/index.ts';
import type { PauseHoldOutcome, PauseMetrics } from '../metrics/index.ts';
import { overHeldBytes, type HeldBytes } from './held-bytes.ts';
import { HeldCalls, type HoldEnding } from './held-calls.ts';
import { SidecarState, type SidecarHold } from './sidecar-state.ts';

type SidecarPaused = Extract<SidecarHold, { state: 'paused' }>;

/** The sidecar's pause: where it is kept, and who hears that it rides on another envelope. */
export interface SidecarPause {
  state: SidecarState;
  /**
   * Told that the pause rides on `anchor` from now on, the envelope it rode on (`from`) having
   * ended: to report it, so that the control plane records `anchor` PAUSED and an operator knows
   * which envelope to resume.
   */
  moved(anchor: LocalEnvelope, from: string | null, kind: SidecarPaused['kind']): void;
}

export interface PauseHoldOptions {
  tenantId: string;
  /** How long a call of a paused envelope waits for its resumption before it is refused. */
  timeoutMs: number;
  /** Calls held at once for paused envelopes; one more is refused at once. */
  maxHeld: number;
}

/** A call held here: its envelope, and how to release it once that runs again. */
interface HeldCall {
  envelope: LocalEnvelope;
  release(): void;
}

/** Why a held call of a paused envelope is refused. */
export interface PauseRefusal {
  code: SvcCode;
  message: string;
}

/**
 * The calls of paused envelopes: each is held before anything is reserved or sent upstream until
 * the envelope is resumed (UpdateEnvelopeStatus PAUSED → RUNNING on any surface), or refused once
 * `timeoutMs` passes. An envelope is paused here by this proxy's Immune System
 * (`proxy_anomaly_action=pause`), or by the control plane's signal on `svc.<tenant>.signals.pause`
 * once it recorded the envelope PAUSED (another proxy's anomaly, UpdateEnvelopeStatus), which
 * also carries the resumption. Held by `HeldCalls`, like the calls awaiting an approval.
 *
 * The Immune System may pause the whole sidecar instead (an anomaly of all its executions'
 * rate): then every envelope's calls are held, those of envelopes met later too, since an agent
 * names its executions itself. That pause rides on an envelope, its anchor, paused too (so the
 * control plane records it PAUSED and signals it): resuming the anchor resumes the sidecar, and
 * nothing else does. When the anchor ends instead (an operator, its budget, or the agent itself
 * ended it), the pause moves to the envelope whose calls have waited longest, or to the next one
 * met, and is reported again naming it. The pause is kept in the proxy's store, so a restart
 * keeps it.
 */
export class PauseHolds {
  readonly #options: PauseHoldOptions;
  readonly #envelopes: Pick<EnvelopeRegistry, 'get'>;
  readonly #metrics: PauseMetrics;
  readonly #held: HeldCalls<'resumed'>;
  readonly #sidecar: SidecarPause;
  /** The calls held, the one waiting longest first. */
  readonly #calls = new Set<HeldCall>();

  constructor(
    options: PauseHoldOptions,
    envelopes: Pick<EnvelopeRegistry, 'get'>,
    metrics: PauseMetrics,
    /** The bound on held requests' bytes, shared with the approval holds. */
    bytes: HeldBytes,
    sidecar: SidecarPause = { state: new SidecarState(), moved: () => undefined },
  ) {
    this.#options = options;
    this.#envelopes = envelopes;
    this.#metrics = metrics;
    this.#held = new HeldCalls(options.maxHeld, bytes, (size) => metrics.held.set(size));
    this.#sidecar = sidecar;
  }

  /** Pauses the envelope here; false when it was paused or ended already. */
  pause(envelope: LocalEnvelope, reason: string): boolean {
    if (envelope.paused !== null || envelope.ending !== null) return false;
    envelope.paused = reason;
    return true;
  }

  /**
   * Pauses the envelope and, with it, every envelope of the sidecar until it is resumed; false
   * when the sidecar was paused or terminated already.
   */
  pauseSidecar(envelope: LocalEnvelope, kind: SidecarPaused['kind'], reason: string): boolean {
    if (this.#sidecar.state.current !== null) return false;
    this.pause(envelope, reason);
    return this.#sidecar.state.set({ state: 'paused', anchor: envelope.envelopeId, kind, reason, ended: null });
  }

  /** Whether the envelope's calls are held: it is paused, or the sidecar is. */
  holds(envelope: LocalEnvelope): boolean {
    return envelope.paused !== null || this.#paused() !== null;
  }

  /**
   * Runs the envelope again here, and the sidecar too when its pause rides on it, and releases
   * the held calls nothing holds any more: a call of an envelope paused on its own, resumed while
   * the sidecar is paused, stays held, in the same hold, until the sidecar is resumed too.
   */
  resume(envelopeId: string): void {
    const envelope = this.#envelopes.get(envelopeId);
    if (envelope !== undefined) envelope.paused = null;
    if (this.#paused()?.anchor === envelopeId) this.#sidecar.state.set(null);
    for (const call of [...this.#calls]) if (!this.holds(call.envelope)) call.release();
  }

  /**
   * Told that an envelope ended: when the sidecar's pause rides on it, the pause moves to the
   * envelope whose calls have waited longest, or, none waiting, to the next one met. Not to one
   * paused on its own: resuming it for its own reason would release the whole sidecar.
   */
  ended(envelopeId: string): void {
    const sidecar = this.#paused();
    if (sidecar?.anchor !== envelopeId) return;
    const next = [...this.#calls].find(
      ({ envelope }) => envelope.paused === null && envelope.ending === null && envelope.envelopeId !== envelopeId,
    );
    if (next === undefined) this.#sidecar.state.set({ ...sidecar, anchor: null, ended: envelopeId });
    else this.#anchored(next.envelope, envelopeId, sidecar);
  }

  /**
   * Listens for the control plane's pauses and resumptions. An envelope this proxy has not served
   * yet is not remembered: its calls would be another proxy's.
   */
  async listen(
    signals: Signals,
    logger: { warn(object: Record<string, unknown>, message: string): void },
  ): Promise<Subscription> {
    const tenant = this.#options.tenantId;
    return signals.subscribeSignals(syncSubjects.pause(tenant), (data) => {
      const parsed = PauseSignalSchema.safeParse(data);
      if (!parsed.success || parsed.data.tenant_id !== tenant) {
        logger.warn({ issues: parsed.error?.issues.length ?? 0 }, 'pause signal does not parse; ignored');
        return;
      }
      const { envelope_id: id, paused, reason } = parsed.data;
      if (!paused) return this.resume(id);
      const envelope = this.#envelopes.get(id);
      if (envelope !== undefined) this.pause(envelope, reason ?? 'paused');
    });
  }

  /**
   * Holds a call of the paused envelope, its request `bytes` long (decoded), until it is resumed:
   * null then (the call goes on), or why it is refused (not resumed in time, over a bound, at
   * shutdown). `signal` aborts when the call is cancelled (its client left, its envelope ended).
   */
  async await(envelope: LocalEnvelope, bytes: number, signal: AbortSignal): Promise<PauseRefusal | null> {
    const { timeoutMs, maxHeld } = this.#options;
    const sidecar = envelope.paused === null ? this.#paused() : null;
    if (envelope.paused === null && sidecar === null) return null;
    // The sidecar's pause whose anchor ended rides on the first envelope met after.
    if (sidecar !== null && sidecar.anchor === null) this.#anchored(envelope, sidecar.ended, sidecar);
    // Named by what holds it: the envelope's own pause, else the sidecar's.
    const bySidecar = (): boolean => envelope.paused === null;
    const paused = (): string =>
      bySidecar()
        ? `the sidecar is paused with envelope ${this.#paused()?.anchor ?? envelope.envelopeId}`
        : `envelope ${envelope.envelopeId} is paused`;
    const full = this.#held.refusal(bytes);
    if (full !== null) {
      this.#count(full === 'shutdown' ? 'shutdown' : 'full');
      switch (full) {
        case 'shutdown':
          return { code: 'SVC-SYS-9001', message: `${paused()} and the proxy is shutting down` };
        case 'full':
          return {
            code: 'SVC-SYS-9005',
            message: `${paused()}, and ${maxHeld} calls of paused envelopes already wait at this proxy (proxy_anomaly_max_held)`,
          };
        case 'bytes':
          return {
            code: 'SVC-SYS-9005',
            message: `${paused()}, and ${overHeldBytes(this.#held.bytes, bytes)}`,
          };
      }
    }
    const ending = await this.#hold(envelope, bytes, timeoutMs, signal);
    const outcome = ending.outcome === 'released' ? 'resumed' : ending.outcome;
    this.#count(outcome);
    switch (outcome) {
      case 'resumed':
        return null;
      case 'timed_out': {
        const why = bySidecar() ? (this.#paused()?.reason ?? '') : (envelope.paused ?? '');
        const anchor = bySidecar() ? (this.#paused()?.anchor ?? envelope.envelopeId) : envelope.envelopeId;
        return {
          code: 'SVC-SYS-9001',
          message: `${paused()} (${why}) and was not resumed within ${timeoutMs / 1000} s (proxy_anomaly_hold_timeout_seconds); resume envelope ${anchor} with UpdateEnvelopeStatus RUNNING`,
        };
      }
      case 'shutdown':
        return { code: 'SVC-SYS-9001', message: `the proxy shut down while ${paused()}` };
      case 'cancelled':
        return {
          code: 'SVC-ENV-1003',
          message: `the call was cancelled (its client left, or its envelope ended) while ${paused()}`,
        };
    }
  }

  /** Refuses every held call (shutdown), and every call that would be held from now on. */
  close(): Promise<void> {
    return this.#held.close();
  }

  #paused(): SidecarPaused | null {
    const current = this.#sidecar.state.current;
    return current?.state === 'paused' ? current : null;
  }

  /** The sidecar's pause rides on `envelope` now, `from` having ended: paused itself, and reported. */
  #anchored(envelope: LocalEnvelope, from: string | null, sidecar: SidecarPaused): void {
    this.#sidecar.state.set({ ...sidecar, anchor: envelope.envelopeId, ended: from });
    this.pause(envelope, sidecar.reason);
    this.#sidecar.moved(envelope, from, sidecar.kind);
  }

  /** Holds a call of the envelope, kept among the calls held meanwhile, until `resume` releases it or it ends. */
  #hold(
    envelope: LocalEnvelope,
    bytes: number,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<HoldEnding<'resumed'>> {
    return this.#held.hold(envelope.envelopeId, bytes, timeoutMs, signal, (release) => {
      const call: HeldCall = { envelope, release: () => release('resumed') };
      this.#calls.add(call);
      return () => this.#calls.delete(call);
    });
  }

  #count(outcome: PauseHoldOutcome): void {
    this.#metrics.holds.inc({ outcome });
  }
}
