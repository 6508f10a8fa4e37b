import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { chargedCall, worstCharge } from '../../test/fixtures/charged-call.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import { createGovernanceMetrics } from '../metrics/index.ts';
import { cutCall } from './cut-call.ts';
import { EventRecorder } from './event-recorder.ts';
import type { GovernanceDeps } from './governance-deps.ts';

const call = chargedCall();

const worst = worstCharge;

/** Governance deps whose provisional store commits each write once `put` of the test says so. */
function depsWith(put: (event: OutboxEvent) => Promise<void>): GovernanceDeps {
  const store = { put, remove: () => Promise.resolve(), all: () => [] };
  const sink = { append: () => Promise.resolve(), reserveRoom: () => Promise.resolve(null) };
  return {
    prices: loadPriceTable(),
    metrics: createGovernanceMetrics(new Registry(), 10, () => false),
    envelopes: { end: () => false },
    recorder: new EventRecorder('acme', 'proxy:pod', sink, store, { error: () => undefined }),
  } as unknown as GovernanceDeps;
}

const upstream = () => ({ signal: new AbortController().signal, drain: vi.fn(), dispose: () => undefined });

describe('a cut answer', () => {
  it('ends only once the worst case standing for its call is written (a flush per commit)', async () => {
    const commit = Promise.withResolvers<void>();
    const written: OutboxEvent[] = [];
    const deps = depsWith(async (event) => {
      await commit.promise;
      written.push(event);
    });
    const end = vi.fn();
    const drained = upstream();
    cutCall(deps, call, drained, 'terminated', 'envelope ended', worst, end);
    expect(drained.drain).toHaveBeenCalledOnce();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(end).not.toHaveBeenCalled();
    commit.resolve();
    await vi.waitFor(() => expect(end).toHaveBeenCalledOnce());
    expect(written.map((event) => event.id)).toEqual(['event:acme:call-1']);
  });

  it('ends in the same turn of the loop when the store commits before `put` returns (the default)', async () => {
    const deps = depsWith(() => Promise.resolve());
    const end = vi.fn();
    const nextTurn = new Promise<boolean>((resolve) => setImmediate(() => resolve(end.mock.calls.length === 1)));
    cutCall(deps, call, upstream(), 'terminated', 'envelope ended', worst, end);
    expect(await nextTurn).toBe(true);
  });

  it('still ends when the write fails: the failure is logged, the answer not held open', async () => {
    const deps = depsWith(() => Promise.reject(new Error('MDB_MAP_FULL')));
    const end = vi.fn();
    cutCall(deps, call, upstream(), 'terminated', 'envelope ended', worst, end);
    await vi.waitFor(() => expect(end).toHaveBeenCalledOnce());
  });
});
