import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { EnvelopeRegistry, type LocalEnvelope } from '../envelopes/index.ts';
import { HeldBytes, PauseHolds } from '../holds/index.ts';
import { createPauseMetrics } from '../metrics/index.ts';
import { AnomalyWatch, type AnomalyAction } from './anomaly-watch.ts';
import type { UsageRecord } from './event-recorder.ts';

const SECOND = 1000;

function rig(action: AnomalyAction, ceilings: { maxCalls?: number; maxSpendUsd?: number } = {}) {
  let now = 0;
  const events: { envelope: LocalEnvelope; record: UsageRecord }[] = [];
  const ended: string[] = [];
  const registry = new Registry();
  const envelopes = new EnvelopeRegistry({ defaultBudgetId: 'b', podExecutionId: 'pod' });
  const pauses = new PauseHolds(
    { tenantId: 'acme', timeoutMs: 60_000, maxHeld: 100 },
    envelopes,
    createPauseMetrics(registry),
    new HeldBytes(1024 * 1024),
  );
  const watch = new AnomalyWatch({
    action,
    options: { intervalMs: SECOND, alpha: 0.3, zThreshold: 4, warmupIntervals: 5, minCount: 10 },
    minSpendUsd: 1,
    maxCalls: ceilings.maxCalls ?? 1_000_000,
    maxSpendUsd: ceilings.maxSpendUsd ?? 1_000_000,
    maxExecutions: 10,
    recorder: {
      usage: (envelope, record) => {
        events.push({ envelope, record });
        return Promise.resolve('event');
      },
      ended: (envelope) => {
        ended.push(envelope.executionId);
        return Promise.resolve();
      },
    },
    envelopes,
    pauses,
    registry,
    logger: { warn: () => undefined },
    now: () => now,
  });
  const envelope = (execution: string): LocalEnvelope =>
    envelopes.resolve({ 'x-svc-execution-id': execution }).envelope;
  let rotated = 0;
  /** An execution id never used before: what an agent rotating its ids sends. */
  const fresh = () => `rotated-${++rotated}`;
  let second = 0;
  let refused = 0;
  /**
   * From the next whole second on, `perSecond[execution][i]` calls of each execution in second i,
   * interleaved; an execution named `*` takes a new execution id for every call. Each call is
   * counted, or its cost `usd` when given; an envelope the registry refuses is counted as refused.
   */
  const run = (perSecond: Record<string, readonly number[]>, usd?: number) => {
    const seconds = Math.max(...Object.values(perSecond).map((counts) => counts.length));
    for (let s = 0; s < seconds; s++, second++) {
      const calls = Object.entries(perSecond).flatMap(([execution, counts]) =>
        Array.from({ length: counts[s] ?? 0 }, () => execution),
      );
      for (const [i, execution] of calls.entries()) {
        now = second * SECOND + (i * SECOND) / calls.length;
        let called: LocalEnvelope;
        try {
          called = envelope(execution === '*' ? fresh() : execution);
        } catch (error) {
          if (!isSvcError(error) || error.code !== 'SVC-ENV-1003') throw error;
          refused++;
          continue;
        }
        if (usd === undefined) watch.observe(called);
        else watch.observeSpend(called, usd);
      }
    }
  };
  /** `perSecond[execution][i]` USD spent by each execution in second i, in calls of 0.01 USD. */
  const spend = (perSecond: Record<string, readonly number[]>) =>
    run(
      Object.fromEntries(
        Object.entries(perSecond).map(([execution, usd]) => [execution, usd.map((u) => Math.round(u / 0.01))]),
      ),
      0.01,
    );
  const anomalies = async () =>
    (await registry.getSingleMetric('svc_immune_anomalies_total')!.get()).values.map((v) => ({
      value: v.value,
      labels: v.labels,
    }));
  return { run, spend, fresh, envelope, envelopes, pauses, events, ended, anomalies, refused: () => refused };
}

const steady = (seconds: number, n: number) => Array.from({ length: seconds }, () => n);

describe('AnomalyWatch', () => {
  it("flags one execution's burst as its own within a busy sidecar, and pauses only its envelope", async () => {
    const { run, envelope, pauses, events, anomalies } = rig('pause');
    run({ busy: steady(8, 50), bursty: [1, 1, 1, 1, 1, 1, 1, 12] });
    expect(events.map((e) => e.record.payload)).toMatchObject([
      { kind: 'call_rate', scope: 'execution', action: 'pause', ceiling: null },
    ]);
    expect(envelope('bursty').paused).toContain('immune system: ');
    expect(pauses.holds(envelope('busy'))).toBe(false);
    expect(pauses.holds(envelope('another'))).toBe(false);
    expect(await anomalies()).toEqual([
      { value: 1, labels: { kind: 'call_rate', action: 'pause', scope: 'execution' } },
    ]);
  });

  it('sees an agent that sends every call under a new execution id, and holds the calls of ids it uses later', async () => {
    const { run, fresh, envelope, pauses, events, anomalies } = rig('pause');
    run({ '*': [...steady(6, 3), 40] });
    expect(events.map((e) => e.record.payload)).toMatchObject([
      { kind: 'call_rate', scope: 'sidecar', action: 'pause', baseline: 3 },
    ]);
    const anchor = events[0]!.envelope;
    expect(anchor.paused).toContain('of the sidecar');
    expect(await anomalies()).toEqual([{ value: 1, labels: { kind: 'call_rate', action: 'pause', scope: 'sidecar' } }]);

    // A call under yet another id, and one of an execution that ran before, are held alike.
    const later = envelope(fresh());
    expect(later.paused).toBeNull();
    expect(pauses.holds(later)).toBe(true);
    let released = false;
    const held = pauses.await(later, 10, new AbortController().signal).then((refusal) => {
      released = true;
      return refusal;
    });
    const earlier = pauses.await(envelope('rotated-1'), 10, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 20));
    expect(released).toBe(false);
    // Resuming the envelope the event names (what the control plane's signal does) resumes the sidecar.
    pauses.resume(anchor.envelopeId);
    expect(await held).toBeNull();
    expect(await earlier).toBeNull();
    expect(pauses.holds(envelope(fresh()))).toBe(false);
  });

  it('ends every envelope of the sidecar with action terminate, and refuses the ids it meets later', () => {
    const { run, envelopes, events, ended, refused } = rig('terminate');
    run({ '*': [...steady(6, 3), 40] });
    expect(events.map((e) => e.record.payload)).toMatchObject([{ scope: 'sidecar', action: 'terminate' }]);
    // Every execution met up to the anomaly ended; the rest of the burst, each under a new id, refused.
    expect(ended).toHaveLength(18 + 10);
    expect(refused()).toBe(40 - 10);
    expect(envelopes.resolve({ 'x-svc-execution-id': 'rotated-1' }).envelope.ending).toMatchObject({
      status: 'TERMINATED',
      reason: expect.stringContaining('of the sidecar'),
    });
    run({ '*': [1], pod: [1] });
    expect(refused()).toBe(40 - 10 + 2);
  });

  it('flags a slow ramp over several executions once the sidecar reaches its ceiling', () => {
    const { run, events } = rig('alert', { maxCalls: 100 });
    // A quarter more each second, spread over three executions: the baselines follow the ramp.
    const ramp = Array.from({ length: 20 }, (_, i) => Math.round(4 * 1.25 ** i));
    const third = ramp.map((n) => Math.round(n / 3));
    run({ a: third, b: third, c: third });
    const sums = third.map((n) => 3 * n);
    expect(events.map((e) => e.record.payload)).toMatchObject(
      sums.filter((n) => n >= 100).map(() => ({ kind: 'call_rate', scope: 'sidecar', count: 100, ceiling: 100 })),
    );
    expect(events.length).toBeGreaterThan(0);
    expect((events[0]!.record.payload as { z: number }).z).toBeLessThan(4);
  });

  it('flags nothing in normal traffic of several executions that start, stop and vary', () => {
    const { run, events } = rig('terminate');
    const wave = (offset: number, seconds: number) => Array.from({ length: seconds }, (_, s) => 2 + ((s + offset) % 3));
    run({ a: wave(0, 30), b: [...steady(10, 0), ...wave(1, 20)], c: wave(2, 15), pod: steady(30, 1) });
    run({ d: wave(0, 20), e: wave(1, 20), '*': steady(20, 1) });
    expect(events).toEqual([]);
  });

  it('does nothing when off', () => {
    const { run, events } = rig('off', { maxCalls: 10 });
    run({ '*': [...steady(6, 3), 40] });
    expect(events).toEqual([]);
  });

  it('watches spend the same way, in its own unit, with a ceiling on the sidecar', () => {
    const { spend, events } = rig('alert', { maxSpendUsd: 10 });
    const busy = Array.from({ length: 8 }, (_, s) => (s % 2 === 0 ? 2 : 4));
    spend({ busy, spender: [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.35, 0.3] });
    expect(events).toEqual([]);
    spend({ busy: busy.slice(0, 7), spender: [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 2.5] });
    expect(events.map((e) => e.record.payload)).toMatchObject([{ kind: 'spend', scope: 'execution', ceiling: null }]);
    // A high rate from the start: no baseline yet, only the ceiling.
    const fresh = rig('alert', { maxSpendUsd: 10 });
    fresh.spend({ a: [6], b: [6] });
    expect(fresh.events.map((e) => e.record.payload)).toMatchObject([
      { kind: 'spend', scope: 'sidecar', count: expect.closeTo(10, 1) as unknown, ceiling: 10 },
    ]);
  });

  it('counts no call while the sidecar is paused: the held calls neither tip another interval nor teach the baseline', () => {
    const { run, pauses, events } = rig('pause');
    run({ '*': [...steady(6, 3), 40] });
    expect(events).toHaveLength(1);
    // Paused: the agent keeps calling, under new ids and an id it used before, far over its rate.
    run({ '*': [40, 40], 'rotated-1': [40, 40] });
    expect(events).toHaveLength(1);
    pauses.resume(events[0]!.envelope.envelopeId);
    // The baseline learnt no held call (the paused seconds count none): 40 a second is an anomaly again.
    run({ '*': [3, 40] });
    expect(events.map((e) => e.record.payload)).toMatchObject([{ scope: 'sidecar' }, { scope: 'sidecar' }]);
    expect((events[1]!.record.payload as { baseline: number }).baseline).toBeLessThanOrEqual(3);
  });
});
