import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { LocalEnvelope } from '../envelopes/index.ts';
import { createPauseMetrics } from '../metrics/index.ts';
import { HeldBytes } from './held-bytes.ts';
import { PauseHolds } from './pause-holds.ts';

function rig(options: { timeoutMs?: number; maxHeld?: number } = {}) {
  const envelope: LocalEnvelope = {
    envelopeId: 'env-1',
    executionId: 'exec-1',
    budgetId: 'b',
    ending: null,
    paused: null,
    inflight: new Set(),
  };
  const registry = new Registry();
  const pauses = new PauseHolds(
    { tenantId: 'acme', timeoutMs: options.timeoutMs ?? 60_000, maxHeld: options.maxHeld ?? 10 },
    { get: (id) => (id === envelope.envelopeId ? envelope : undefined) },
    createPauseMetrics(registry),
    new HeldBytes(1024 * 1024),
  );
  const outcomes = async () =>
    Object.fromEntries(
      (await registry.getSingleMetric('svc_proxy_pause_holds_total')!.get()).values.map((v) => [
        String(v.labels.outcome),
        v.value,
      ]),
    );
  return { envelope, pauses, outcomes };
}

describe('PauseHolds', () => {
  it('pauses an envelope once, holds its calls, and releases them when it is resumed', async () => {
    const { envelope, pauses, outcomes } = rig();
    expect(pauses.pause(envelope, 'immune system: 40 calls')).toBe(true);
    expect(pauses.pause(envelope, 'again')).toBe(false);
    expect(envelope.paused).toBe('immune system: 40 calls');
    const first = pauses.await(envelope, 100, new AbortController().signal);
    const second = pauses.await(envelope, 100, new AbortController().signal);
    pauses.resume('env-1');
    expect(await first).toBeNull();
    expect(await second).toBeNull();
    expect(envelope.paused).toBeNull();
    expect(await outcomes()).toEqual({ resumed: 2 });
  });

  it('refuses a call not resumed in time with SVC-SYS-9001 naming the envelope and the setting', async () => {
    const { envelope, pauses, outcomes } = rig({ timeoutMs: 50 });
    pauses.pause(envelope, 'immune system: 40 calls');
    const refused = await pauses.await(envelope, 100, new AbortController().signal);
    expect(refused?.code).toBe('SVC-SYS-9001');
    expect(refused?.message).toContain('envelope env-1 is paused (immune system: 40 calls)');
    expect(refused?.message).toContain('proxy_anomaly_hold_timeout_seconds');
    expect(envelope.paused).not.toBeNull();
    expect(await outcomes()).toEqual({ timed_out: 1 });
  });

  it('refuses one call over the bound at once (SVC-SYS-9005), and every held call at shutdown', async () => {
    const { envelope, pauses, outcomes } = rig({ maxHeld: 1 });
    pauses.pause(envelope, 'why');
    const held = pauses.await(envelope, 100, new AbortController().signal);
    expect((await pauses.await(envelope, 100, new AbortController().signal))?.code).toBe('SVC-SYS-9005');
    await pauses.close();
    expect((await held)?.code).toBe('SVC-SYS-9001');
    expect((await pauses.await(envelope, 100, new AbortController().signal))?.code).toBe('SVC-SYS-9001');
    expect(await outcomes()).toEqual({ full: 1, shutdown: 2 });
  });

  it("follows the control plane's pause signals for the envelopes it serves, and ignores bad ones", async () => {
    const { envelope, pauses } = rig();
    const warnings: string[] = [];
    let subject = '';
    let deliver: (data: unknown) => void = () => undefined;
    await pauses.listen(
      {
        publishSignal: () => Promise.resolve(),
        subscribeSignals: (pattern, handler) => {
          subject = pattern;
          deliver = (data) => void handler(data, pattern);
          return Promise.resolve({ unsubscribe: () => Promise.resolve() });
        },
      },
      { warn: (object, message) => warnings.push(message) },
    );
    expect(subject).toBe('svc.acme.signals.pause');
    deliver({ tenant_id: 'acme', envelope_id: 'env-unknown', paused: true, reason: 'elsewhere' });
    deliver({ tenant_id: 'other', envelope_id: 'env-1', paused: true, reason: 'not ours' });
    deliver({ tenant_id: 'acme', envelope_id: 'env-1', paused: 'yes' });
    expect(envelope.paused).toBeNull();
    expect(warnings).toHaveLength(2);
    deliver({ tenant_id: 'acme', envelope_id: 'env-1', paused: true, reason: 'operator' });
    expect(envelope.paused).toBe('operator');
    const held = pauses.await(envelope, 100, new AbortController().signal);
    deliver({ tenant_id: 'acme', envelope_id: 'env-1', paused: false, reason: null });
    expect(await held).toBeNull();
    expect(envelope.paused).toBeNull();
  });

  it('does not pause an envelope that ended', () => {
    const { envelope, pauses } = rig();
    envelope.ending = { status: 'TERMINATED', reason: 'manual' };
    expect(pauses.pause(envelope, 'why')).toBe(false);
    expect(envelope.paused).toBeNull();
  });
});
