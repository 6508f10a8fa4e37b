import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { settledWithin } from '../../test/proxy/settled-within.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';
import { createPauseMetrics } from '../metrics/index.ts';
import { HeldBytes } from './held-bytes.ts';
import { PauseHolds } from './pause-holds.ts';
import { SidecarState } from './sidecar-state.ts';

function rig() {
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
  const pauses = new PauseHolds(
    { tenantId: 'acme', timeoutMs: 60_000, maxHeld: 10 },
    { get: (id) => envelopes.get(id) },
    createPauseMetrics(new Registry()),
    new HeldBytes(1024 * 1024),
    { state, moved: (anchor, from, kind) => moves.push({ anchor: anchor.envelopeId, from, kind }) },
  );
  const held = (of: LocalEnvelope) => pauses.await(of, 10, new AbortController().signal);
  /** Ends the envelope as the registry does: its own held calls are cut, the pause hears it. */
  const end = (of: LocalEnvelope) => {
    of.ending = { status: 'TERMINATED', reason: 'ended by its agent' };
    pauses.ended(of.envelopeId);
  };
  return { envelope, pauses, state, moves, held, end };
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
    const { envelope, pauses, held } = rig();
    const [own, anchor] = [envelope('a'), envelope('b')];
    pauses.pause(own, 'its own burst');
    pauses.pauseSidecar(anchor, 'call_rate', 'the sidecar');
    const call = held(own);
    pauses.resume('a');
    expect(await settledWithin(call, 50)).toBe(false);
    pauses.resume('b');
    expect(await call).toBeNull();
  });
});
