import { Counter, type Registry } from 'prom-client';
import { RateBaseline, type AnomalyOptions, type Detection } from '../../core/brain/index.ts';
import { BoundedLru } from '../../core/resilience/bounded-lru.ts';
import type { EnvelopeRegistry, LocalEnvelope } from '../envelopes/index.ts';
import type { PauseHolds } from '../holds/index.ts';
import type { EventRecorder } from './event-recorder.ts';

/**
 * What a detected anomaly does: nothing, an alert (event, metric, log), the envelope paused (its
 * calls held until it is resumed), or the envelope's end.
 */
export type AnomalyAction = 'off' | 'alert' | 'pause' | 'terminate';

export interface AnomalyWatchDeps {
  action: AnomalyAction;
  /** For the call rate; the spend's differ in their `minCount` (USD), `minSpendUsd`. */
  options: AnomalyOptions;
  minSpendUsd: number;
  maxExecutions: number;
  recorder: Pick<EventRecorder, 'usage' | 'ended'>;
  envelopes: Pick<EnvelopeRegistry, 'end'>;
  pauses: Pick<PauseHolds, 'pause'>;
  registry: Registry;
  logger: { warn(obj: object, msg: string): void };
  now?: () => number;
}

/**
 * The Immune System's anomaly detection in the proxy: each execution's rate of governed calls
 * (model calls and tool calls) and its spend (priced model calls) against its own baselines
 * (core/brain/immune/anomaly.ts). A detection is recorded as an `immune.anomaly` event (on the bus, stored and listed with the
 * other events), counted in `svc_immune_anomalies_total`, logged; with action `pause` it pauses
 * the envelope (its calls are held until it is resumed; the control plane records PAUSED from
 * the event), with action `terminate` it ends the envelope, which cuts its calls in flight.
 */
export class AnomalyWatch {
  readonly #deps: AnomalyWatchDeps;
  readonly #baselines: BoundedLru<string, { calls: RateBaseline; spend: RateBaseline }>;
  readonly #detections: Counter<'kind' | 'action'>;
  readonly #now: () => number;

  constructor(deps: AnomalyWatchDeps) {
    this.#deps = deps;
    this.#baselines = new BoundedLru(deps.maxExecutions);
    this.#now = deps.now ?? Date.now;
    this.#detections = new Counter({
      name: 'svc_immune_anomalies_total',
      help: 'Anomalies the Immune System detected, by kind and the action taken',
      labelNames: ['kind', 'action'],
      registers: [deps.registry],
    });
  }

  /** Counts one governed call of the envelope's execution; acts on an anomaly. */
  observe(envelope: LocalEnvelope): void {
    if (this.#deps.action === 'off') return;
    const detection = this.#of(envelope).calls.observe(this.#now());
    if (detection !== null) this.#act(envelope, 'call_rate', detection, `${detection.count} calls`);
  }

  /** Counts what a model call of the envelope's execution cost; acts on an anomaly. */
  observeSpend(envelope: LocalEnvelope, usd: number): void {
    if (this.#deps.action === 'off' || !(usd > 0)) return;
    const detection = this.#of(envelope).spend.observe(this.#now(), usd);
    if (detection !== null) this.#act(envelope, 'spend', detection, `${detection.count} USD`);
  }

  #of(envelope: LocalEnvelope): { calls: RateBaseline; spend: RateBaseline } {
    let baselines = this.#baselines.get(envelope.executionId);
    if (baselines === undefined) {
      const { options, minSpendUsd } = this.#deps;
      baselines = { calls: new RateBaseline(options), spend: new RateBaseline({ ...options, minCount: minSpendUsd }) };
      this.#baselines.set(envelope.executionId, baselines);
    }
    return baselines;
  }

  #act(envelope: LocalEnvelope, kind: 'call_rate' | 'spend', detection: Detection, what: string): void {
    const { action } = this.#deps;
    this.#detections.inc({ kind, action });
    const reason = `immune system: ${what} this interval against a baseline of ${detection.baseline} (z ${detection.z})`;
    this.#deps.logger.warn(
      { envelope_id: envelope.envelopeId, execution_id: envelope.executionId, kind, ...detection, action },
      `${kind} anomaly`,
    );
    void this.#deps.recorder.usage(envelope, {
      eventType: 'immune.anomaly',
      model: null,
      tokens: { input: 0, output: 0 },
      costUsd: 0,
      payload: {
        kind,
        count: detection.count,
        baseline: detection.baseline,
        z: detection.z,
        interval_start: new Date(detection.intervalStart).toISOString(),
        action,
      },
    });
    if (action === 'pause') this.#deps.pauses.pause(envelope, reason);
    if (action === 'terminate' && this.#deps.envelopes.end(envelope.envelopeId, { status: 'TERMINATED', reason }))
      void this.#deps.recorder.ended(envelope, 'TERMINATED', reason);
  }
}
