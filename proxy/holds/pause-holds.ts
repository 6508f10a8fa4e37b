import type { Signals, Subscription } from '../../core/bus/bus.ts';
import type { SvcCode } from '../../core/errors/index.ts';
import { PauseSignalSchema, syncSubjects } from '../../core/sync/contract.ts';
import type { EnvelopeRegistry, LocalEnvelope } from '../envelopes/index.ts';
import type { PauseHoldOutcome, PauseMetrics } from '../metrics/index.ts';
import { overHeldBytes, type HeldBytes } from './held-bytes.ts';
import { HeldCalls } from './held-calls.ts';

export interface PauseHoldOptions {
  tenantId: string;
  /** How long a call of a paused envelope waits for its resumption before it is refused. */
  timeoutMs: number;
  /** Calls held at once for paused envelopes; one more is refused at once. */
  maxHeld: number;
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
 * names its executions itself. That pause rides on the envelope whose call tipped it (paused
 * too, so the control plane records it PAUSED and signals it): its calls are held under that
 * envelope, and resuming it resumes the sidecar.
 */
export class PauseHolds {
  readonly #options: PauseHoldOptions;
  readonly #envelopes: Pick<EnvelopeRegistry, 'get'>;
  readonly #metrics: PauseMetrics;
  readonly #held: HeldCalls<'resumed'>;
  /** The sidecar's pause: the envelope it rides on, and why. */
  #sidecar: { anchor: string; reason: string } | null = null;

  constructor(
    options: PauseHoldOptions,
    envelopes: Pick<EnvelopeRegistry, 'get'>,
    metrics: PauseMetrics,
    /** The bound on held requests' bytes, shared with the approval holds. */
    bytes: HeldBytes,
  ) {
    this.#options = options;
    this.#envelopes = envelopes;
    this.#metrics = metrics;
    this.#held = new HeldCalls(options.maxHeld, bytes, (size) => metrics.held.set(size));
  }

  /** Pauses the envelope here; false when it was paused or ended already. */
  pause(envelope: LocalEnvelope, reason: string): boolean {
    if (envelope.paused !== null || envelope.ending !== null) return false;
    envelope.paused = reason;
    return true;
  }

  /**
   * Pauses the envelope and, with it, every envelope of the sidecar until it is resumed; false
   * when the sidecar was paused already.
   */
  pauseSidecar(envelope: LocalEnvelope, reason: string): boolean {
    if (this.#sidecar !== null) return false;
    this.pause(envelope, reason);
    this.#sidecar = { anchor: envelope.envelopeId, reason };
    return true;
  }

  /** Whether the envelope's calls are held: it is paused, or the sidecar is. */
  holds(envelope: LocalEnvelope): boolean {
    return envelope.paused !== null || this.#sidecar !== null;
  }

  /** Runs the envelope again here and releases its held calls; the sidecar too when its pause rides on it. */
  resume(envelopeId: string): void {
    const envelope = this.#envelopes.get(envelopeId);
    if (envelope !== undefined) envelope.paused = null;
    if (this.#sidecar?.anchor === envelopeId) this.#sidecar = null;
    this.#held.release(envelopeId, 'resumed');
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
    const sidecar = envelope.paused === null ? this.#sidecar : null;
    if (envelope.paused === null && sidecar === null) return null;
    // Held under the envelope whose resumption releases it.
    const id = sidecar?.anchor ?? envelope.envelopeId;
    const why = sidecar?.reason ?? envelope.paused ?? '';
    const paused = sidecar === null ? `envelope ${id} is paused` : `the sidecar is paused with envelope ${id}`;
    const full = this.#held.refusal(bytes);
    if (full !== null) {
      this.#count(full === 'shutdown' ? 'shutdown' : 'full');
      switch (full) {
        case 'shutdown':
          return { code: 'SVC-SYS-9001', message: `${paused} and the proxy is shutting down` };
        case 'full':
          return {
            code: 'SVC-SYS-9005',
            message: `${paused}, and ${maxHeld} calls of paused envelopes already wait at this proxy (proxy_anomaly_max_held)`,
          };
        case 'bytes':
          return {
            code: 'SVC-SYS-9005',
            message: `${paused}, and ${overHeldBytes(this.#held.bytes, bytes)}`,
          };
      }
    }
    const ending = await this.#held.hold(id, bytes, timeoutMs, signal);
    const outcome = ending.outcome === 'released' ? 'resumed' : ending.outcome;
    this.#count(outcome);
    switch (outcome) {
      case 'resumed':
        return null;
      case 'timed_out':
        return {
          code: 'SVC-SYS-9001',
          message: `${paused} (${why}) and was not resumed within ${timeoutMs / 1000} s (proxy_anomaly_hold_timeout_seconds); resume envelope ${id} with UpdateEnvelopeStatus RUNNING`,
        };
      case 'shutdown':
        return { code: 'SVC-SYS-9001', message: `the proxy shut down while ${paused}` };
      case 'cancelled':
        return {
          code: 'SVC-ENV-1003',
          message: `the call was cancelled (its client left, or its envelope ended) while ${paused}`,
        };
    }
  }

  /** Refuses every held call (shutdown), and every call that would be held from now on. */
  close(): Promise<void> {
    return this.#held.close();
  }

  #count(outcome: PauseHoldOutcome): void {
    this.#metrics.holds.inc({ outcome });
  }
}
