import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { settledWithin } from '../../test/proxy/settled-within.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';
import { createPauseMetrics } from '../metrics/index.ts';
import { HeldBytes } from './held-bytes.ts';
import { PauseHolds } from './pause-holds.ts';
import { SidecarState } from './sidecar-state.ts';

function rig(timeoutMs = 60_000) {
  const envelopes = new Map<string, LocalEnvelope>();
  const envelope = (id: string): LocalEnvelope => {
    const made: LocalEnvelope = {
      envelopeId: id,
      executionId: `exec-${id}`,
      budgetId: 'b',
      ending: null,
      paused: null,
      inflight: new Set(),
    };
    envelopes.set(id, made);
    return made;
  };
  const moves: { anchor: string; from: string | null; kind: string }[] = [];
  const state = new SidecarState();
  const registry = new Registry();
  const pauses = new PauseHolds(
    { tenantId: 'acme', timeoutMs, maxHeld: 10 },
    { get: (id) => envelopes.get(id) },
    createPauseMetrics(registry),
    new HeldBytes(1024 * 1024),
    { state, moved: (anchor, from, kind) => moves.push({ anchor: anchor.envelopeId, from, kind }) },
  );
  const held = (of: LocalEnvelope) => pauses.await(of, 10, new AbortController().signal);
  /** Ends the envelope as the registry does: its own held calls are cut, the pause hears it. */
  const end = (of: LocalEnvelope) => {
    of.ending = { status: 'TERMINATED', reason: 'ended by its agent' };
    pauses.ended(of.envelopeId);
  };
  const outcomes = async () =>
    Object.fromEntries(
      (await registry.getSingleMetric('svc_proxy_pause_holds_total')!.get()).values.map((v) => [
        String(v.labels.outcome),
        v.value,
      ]),
    );
  return { envelope, pauses, state, moves, held, end, outcomes };
}

describe("the sidecar's pause when the envelope it rides on ends", () => {
  it('moves to the envelope whose calls waited longest, and only resuming that one releases the sidecar', async () => {
    const { envelope, pauses, state, moves, held, end } = rig();
    const [anchor, first, second] = [envelope('a'), envelope('b'), envelope('c')];
    pauses.pauseSidecar(anchor, 'call_rate', 'immune system: 40 calls');
    const calls = [held(first), held(second), held(first)];
    end(anchor);
    expect(moves).toEqual([{ anchor: 'b', from: 'a', kind: 'call_rate' }]);
    expect(state.current).toMatchObject({ state: 'paused', anchor: 'b', ended: 'a' });
    expect(first.paused).toBe('immune system: 40 calls');

    // The ended anchor's resumption (it cannot run again) releases nothing.
    pauses.resume('a');
    expect(await settledWithin(Promise.race(calls), 50)).toBe(false);
    expect(pauses.holds(envelope('d'))).toBe(true);

    pauses.resume('b');
    expect(await Promise.all(calls)).toEqual([null, null, null]);
    expect(state.current).toBeNull();
    expect(pauses.holds(envelope('e'))).toBe(false);
  });

  it('does not move to an envelope paused on its own meanwhile, though its call waited longest', async () => {
    const { envelope, pauses, state, moves, held, end } = rig();
    const [anchor, own, other] = [envelope('a'), envelope('b'), envelope('c')];
    pauses.pauseSidecar(anchor, 'call_rate', 'the sidecar');
    const calls = [held(own), held(other)];
    pauses.pause(own, 'its own burst');
    end(anchor);
    expect(moves).toEqual([{ anchor: 'c', from: 'a', kind: 'call_rate' }]);
    // Its own resumption releases neither the sidecar nor its call.
    pauses.resume('b');
    expect(await settledWithin(Promise.race(calls), 50)).toBe(false);
    expect(state.current).toMatchObject({ anchor: 'c' });
    pauses.resume('c');
    expect(await Promise.all(calls)).toEqual([null, null]);
  });

  it('moves to the next envelope met when no call waits, and reports the one that ended', async () => {
    const { envelope, pauses, state, moves, held, end } = rig();
    const anchor = envelope('a');
    pauses.pauseSidecar(anchor, 'spend', 'immune system: 9 USD');
    end(anchor);
    expect(moves).toEqual([]);
    expect(state.current).toMatchObject({ state: 'paused', anchor: null, ended: 'a' });

    const next = envelope('b');
    const call = held(next);
    expect(moves).toEqual([{ anchor: 'b', from: 'a', kind: 'spend' }]);
    expect(await settledWithin(call, 50)).toBe(false);
    pauses.resume('b');
    expect(await call).toBeNull();
    expect(state.current).toBeNull();
  });

  it('stays with its anchor when another envelope ends', async () => {
    const { envelope, pauses, state, moves, held, end } = rig();
    const [anchor, other] = [envelope('a'), envelope('b')];
    pauses.pauseSidecar(anchor, 'call_rate', 'why');
    const call = held(envelope('c'));
    end(other);
    expect(moves).toEqual([]);
    expect(state.current).toMatchObject({ anchor: 'a' });
    pauses.resume('a');
    expect(await call).toBeNull();
  });

  it('holds the call of an envelope paused on its own, once resumed, for as long as the sidecar is paused', async () => {
    const { envelope, pauses, held, outcomes } = rig();
    const [own, anchor] = [envelope('a'), envelope('b')];
    pauses.pause(own, 'its own burst');
    pauses.pauseSidecar(anchor, 'call_rate', 'the sidecar');
    const call = held(own);
    pauses.resume('a');
    expect(await settledWithin(call, 50)).toBe(false);
    pauses.resume('b');
    expect(await call).toBeNull();
    // One hold, counted once.
    expect(await outcomes()).toEqual({ resumed: 1 });
  });

  it('times such a call out from when it was first held, not from its own resumption', async () => {
    const { envelope, pauses, held, outcomes } = rig(400);
    const [own, anchor] = [envelope('a'), envelope('b')];
    pauses.pause(own, 'its own burst');
    pauses.pauseSidecar(anchor, 'call_rate', 'the sidecar');
    const call = held(own);
    await new Promise((resolve) => setTimeout(resolve, 250));
    pauses.resume('a');
    // Its 400 ms end 150 ms from here, not 400.
    expect(await settledWithin(call, 300)).toBe(true);
    const refused = await call;
    expect(refused?.code).toBe('SVC-SYS-9001');
    expect(refused?.message).toContain('the sidecar is paused with envelope b (the sidecar)');
    expect(await outcomes()).toEqual({ timed_out: 1 });
  });
});
