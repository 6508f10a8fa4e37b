import { Counter, type Registry } from 'prom-client';
import { RateBaseline, type AnomalyOptions, type Detection } from '../../core/brain/index.ts';
import { BoundedLru } from '../../core/resilience/bounded-lru.ts';
import type { EnvelopeRegistry, LocalEnvelope } from '../envelopes/index.ts';
import type { PauseHolds } from '../holds/index.ts';
import type { EventRecorder, UsageRecord } from './event-recorder.ts';

/**
 * What a detected anomaly does: nothing, an alert (event, metric, log), a pause (calls held until
 * resumed), or an end; of the execution's envelope for its own anomaly, of the whole sidecar for
 * the sidecar's.
 */
export type AnomalyAction = 'off' | 'alert' | 'pause' | 'terminate';

/**
 * The `immune.anomaly` event reporting that the sidecar's pause rides on another envelope (the
 * event's), the one it rode on (`moved_from`) having ended: with `action: "pause"` the control
 * plane records the new one PAUSED, and resuming it resumes the sidecar. It carries no figures:
 * the interval that tipped the pause was reported with the first anchor.
 */
export function movedPauseRecord(kind: 'call_rate' | 'spend', from: string | null): UsageRecord {
  return {
    eventType: 'immune.anomaly',
    model: null,
    tokens: { input: 0, output: 0 },
    costUsd: 0,
    payload: { kind, scope: 'sidecar', action: 'pause', moved_from: from },
  };
}

/** Whose rate was anomalous: one execution's, or the whole sidecar's (all its executions). */
type Scope = 'execution' | 'sidecar';

interface Baselines {
  calls: RateBaseline;
  spend: RateBaseline;
}

export interface AnomalyWatchDeps {
  action: AnomalyAction;
  /** For the call rate; the spend's differ in their `minCount` (USD), `minSpendUsd`. */
  options: AnomalyOptions;
  minSpendUsd: number;
  /** The sidecar's calls, and spend (USD), in one interval that are an anomaly whatever its baseline. */
  maxCalls: number;
  maxSpendUsd: number;
  maxExecutions: number;
  recorder: Pick<EventRecorder, 'usage' | 'ended'>;
  envelopes: Pick<EnvelopeRegistry, 'end' | 'endAll'>;
  pauses: Pick<PauseHolds, 'pause' | 'pauseSidecar' | 'holds'>;
  registry: Registry;
  logger: { warn(obj: object, msg: string): void };
  now?: () => number;
}

/**
 * The Immune System's anomaly detection in the proxy: the rate of governed calls (model calls and
 * tool calls) and the spend (priced model calls) of each execution against its own baselines, and
 * of the whole sidecar (every execution's calls counted) against the sidecar's, which also has a
 * ceiling (core/brain/immune/anomaly.ts). The agent names its executions itself: one that sends
 * each call under a new `X-Svc-Execution-Id` starts a baseline per call, and only the sidecar's
 * sees it. A detection is recorded as an `immune.anomaly` event (on the bus, stored and listed
 * with the other events), counted in `svc_immune_anomalies_total`, logged; with action `pause` it
 * pauses the envelope, or for the sidecar's every envelope, met later ones too (their calls are
 * held until the envelope whose call tipped it is resumed, or the one the pause moved to when
 * that one ended; the control plane records it PAUSED from the event); with action `terminate`
 * it ends the envelope, or every envelope of the sidecar and any it meets later, which cuts their
 * calls in flight. The sidecar's pause and termination are kept across restarts (PauseHolds).
 */
export class AnomalyWatch {
  readonly #deps: AnomalyWatchDeps;
  readonly #baselines: BoundedLru<string, Baselines>;
  readonly #sidecar: Baselines;
  readonly #detections: Counter<'kind' | 'action' | 'scope'>;
  readonly #now: () => number;

  constructor(deps: AnomalyWatchDeps) {
    this.#deps = deps;
    this.#baselines = new BoundedLru(deps.maxExecutions);
    this.#sidecar = this.#made({ calls: deps.maxCalls, spend: deps.maxSpendUsd });
    this.#now = deps.now ?? Date.now;
    this.#detections = new Counter({
      name: 'svc_immune_anomalies_total',
      help: 'Anomalies the Immune System detected, by kind, whose rate (an execution, the sidecar) and the action taken',
      labelNames: ['kind', 'action', 'scope'],
      registers: [deps.registry],
    });
  }

  /** Counts one governed call of the envelope's execution; acts on an anomaly. */
  observe(envelope: LocalEnvelope): void {
    if (this.#deps.action === 'off') return;
    this.#judge(envelope, 'calls', 1);
  }

  /** Counts what a model call of the envelope's execution cost; acts on an anomaly. */
  observeSpend(envelope: LocalEnvelope, usd: number): void {
    if (this.#deps.action === 'off' || !(usd > 0)) return;
    this.#judge(envelope, 'spend', usd);
  }

  /**
   * Counts into the sidecar's baseline and the execution's; the sidecar's anomaly, the wider, acts
   * first. Nothing is counted while the envelope or the sidecar is paused: its calls are held, and
   * an agent that keeps calling meanwhile would otherwise teach the baselines its held rate, or
   * tip further intervals whose events pause further envelopes.
   */
  #judge(envelope: LocalEnvelope, rate: keyof Baselines, amount: number): void {
    if (this.#deps.pauses.holds(envelope)) return;
    const at = this.#now();
    const sidecar = this.#sidecar[rate].observe(at, amount);
    const own = this.#of(envelope)[rate].observe(at, amount);
    const kind = rate === 'calls' ? 'call_rate' : 'spend';
    if (sidecar !== null) this.#act(envelope, kind, 'sidecar', sidecar);
    else if (own !== null) this.#act(envelope, kind, 'execution', own);
  }

  #of(envelope: LocalEnvelope): Baselines {
    let baselines = this.#baselines.get(envelope.executionId);
    if (baselines === undefined) {
      baselines = this.#made();
      this.#baselines.set(envelope.executionId, baselines);
    }
    return baselines;
  }

  /** An execution's baselines, or with the ceilings the sidecar's. */
  #made(ceilings: { calls?: number; spend?: number } = {}): Baselines {
    const { options, minSpendUsd } = this.#deps;
    return {
      calls: new RateBaseline({ ...options, ceiling: ceilings.calls }),
      spend: new RateBaseline({ ...options, minCount: minSpendUsd, ceiling: ceilings.spend }),
    };
  }

  #act(envelope: LocalEnvelope, kind: 'call_rate' | 'spend', scope: Scope, detection: Detection): void {
    const { action } = this.#deps;
    this.#detections.inc({ kind, action, scope });
    const amount = kind === 'call_rate' ? `${detection.count} calls` : `${detection.count} USD`;
    const whose = scope === 'sidecar' ? 'of the sidecar' : 'of the execution';
    const against =
      detection.ceiling === null
        ? `against a baseline of ${detection.baseline} (z ${detection.z})`
        : `reaching the ceiling of ${detection.ceiling} (${kind === 'call_rate' ? 'proxy_anomaly_max_calls' : 'proxy_anomaly_max_spend_usd'})`;
    const reason = `immune system: ${amount} ${whose} this interval ${against}`;
    this.#deps.logger.warn(
      { envelope_id: envelope.envelopeId, execution_id: envelope.executionId, kind, scope, ...detection, action },
      `${kind} anomaly`,
    );
    void this.#deps.recorder.usage(envelope, {
      eventType: 'immune.anomaly',
      model: null,
      tokens: { input: 0, output: 0 },
      costUsd: 0,
      payload: {
        kind,
        scope,
        count: detection.count,
        baseline: detection.baseline,
        z: detection.z,
        ceiling: detection.ceiling,
        interval_start: new Date(detection.intervalStart).toISOString(),
        action,
      },
    });
    if (action === 'pause') {
      if (scope === 'sidecar') this.#deps.pauses.pauseSidecar(envelope, kind, reason);
      else this.#deps.pauses.pause(envelope, reason);
    }
    if (action !== 'terminate') return;
    const ending = { status: 'TERMINATED', reason } as const;
    if (scope === 'sidecar') {
      for (const each of this.#deps.envelopes.endAll(ending))
        void this.#deps.recorder.ended(each, 'TERMINATED', reason);
    } else if (this.#deps.envelopes.end(envelope.envelopeId, ending)) {
      void this.#deps.recorder.ended(envelope, 'TERMINATED', reason);
    }
  }
}
