import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { Ending, LocalEnvelope } from '../envelopes/index.ts';
import { AnomalyWatch, type AnomalyAction } from './anomaly-watch.ts';
import type { UsageRecord } from './event-recorder.ts';

const SECOND = 1000;

function rig(action: AnomalyAction) {
  let now = 0;
  const events: UsageRecord[] = [];
  const ended: { id: string; ending: Ending }[] = [];
  const paused: { id: string; reason: string }[] = [];
  const registry = new Registry();
  const watch = new AnomalyWatch({
    action,
    options: { intervalMs: SECOND, alpha: 0.3, zThreshold: 4, warmupIntervals: 5, minCount: 10 },
    minSpendUsd: 1,
    maxExecutions: 10,
    recorder: {
      usage: (_envelope, record) => {
        events.push(record);
        return Promise.resolve('event');
      },
      ended: () => Promise.resolve(),
    },
    envelopes: {
      end: (id, ending) => {
        ended.push({ id, ending });
        return true;
      },
    },
    pauses: {
      pause: (envelope, reason) => {
        paused.push({ id: envelope.envelopeId, reason });
        return true;
      },
    },
    registry,
    logger: { warn: () => undefined },
    now: () => now,
  });
  const envelope = (execution: string): LocalEnvelope => ({
    envelopeId: `env-${execution}`,
    executionId: execution,
    budgetId: 'b',
    ending: null,
    paused: null,
    inflight: new Set(),
  });
  /** `perSecond[i]` calls of `execution` in second i. */
  const run = (execution: string, perSecond: number[]) => {
    for (const [s, n] of perSecond.entries())
      for (let i = 0; i < n; i++) {
        now = s * SECOND + (i * SECOND) / n;
        watch.observe(envelope(execution));
      }
  };
  /** `perSecond[i]` USD spent by `execution` in second i, in calls of 0.01 USD. */
  const spend = (execution: string, perSecond: number[]) => {
    for (const [s, usd] of perSecond.entries()) {
      const calls = Math.round(usd / 0.01);
      for (let i = 0; i < calls; i++) {
        now = s * SECOND + (i * SECOND) / calls;
        watch.observeSpend(envelope(execution), 0.01);
      }
    }
  };
  return { run, spend, events, ended, paused, registry };
}

describe('AnomalyWatch', () => {
  it('records an immune.anomaly event and counts it when an execution bursts past its baseline', async () => {
    const { run, events, ended, registry } = rig('alert');
    run('steady', [3, 3, 3, 3, 3, 3, 3, 3]);
    run('bursty', [3, 3, 3, 3, 3, 3, 40]);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ eventType: 'immune.anomaly', payload: { kind: 'call_rate', action: 'alert' } });
    expect(ended).toEqual([]);
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'svc_immune_anomalies_total');
    expect(metric?.values[0]).toMatchObject({ value: 1, labels: { kind: 'call_rate', action: 'alert' } });
  });

  it('ends the envelope with action terminate, and does nothing when off', () => {
    const terminate = rig('terminate');
    terminate.run('x', [3, 3, 3, 3, 3, 3, 40]);
    expect(terminate.ended).toEqual([
      { id: 'env-x', ending: { status: 'TERMINATED', reason: expect.stringContaining('immune system') } },
    ]);
    const off = rig('off');
    off.run('x', [3, 3, 3, 3, 3, 3, 40]);
    expect(off.events).toEqual([]);
  });

  it('pauses the envelope with action pause, records the action, and ends nothing', async () => {
    const { run, events, ended, paused, registry } = rig('pause');
    run('steady', [3, 3, 3, 3, 3, 3, 3, 3]);
    expect(paused).toEqual([]);
    run('x', [3, 3, 3, 3, 3, 3, 40]);
    expect(paused).toEqual([{ id: 'env-x', reason: expect.stringContaining('immune system: ') }]);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ eventType: 'immune.anomaly', payload: { kind: 'call_rate', action: 'pause' } });
    expect(ended).toEqual([]);
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'svc_immune_anomalies_total');
    expect(metric?.values[0]).toMatchObject({ value: 1, labels: { kind: 'call_rate', action: 'pause' } });
  });

  it('watches spend the same way, in its own unit', () => {
    const { spend, events } = rig('alert');
    spend('steady', [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.35, 0.3]);
    expect(events).toEqual([]);
    spend('spender', [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 5]);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ eventType: 'immune.anomaly', payload: { kind: 'spend' } });
    expect((events[0]?.payload as { count: number }).count).toBeGreaterThanOrEqual(1);
  });
});
