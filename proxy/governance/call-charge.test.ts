import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { chargedCall, worstCharge } from '../../test/fixtures/charged-call.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import { ZERO, type Amount } from '../enforcement/index.ts';
import { createGovernanceMetrics } from '../metrics/index.ts';
import { CallCharge } from './call-charge.ts';
import { EventRecorder } from './event-recorder.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import type { Charge } from './settle-call.ts';

const worst = worstCharge;
const exact: Charge = { ...worst, usage: { input: 12, output: 30, cachedInput: 0 }, basis: 'usage', cutOff: null };

/** A call's charge over a recorder whose published and provisional events the test reads. */
function callCharge() {
  const published: OutboxEvent[] = [];
  const provisional = new Map<string, OutboxEvent>();
  const holds: OutboxEvent[] = [];
  const settled: Amount[] = [];
  const store = {
    put: (event: OutboxEvent) => {
      holds.push(event);
      provisional.set(event.id, event);
      return Promise.resolve();
    },
    remove: (id: string) => Promise.resolve(void provisional.delete(id)),
    all: () => [...provisional.values()],
  };
  const sink = {
    append: (event: OutboxEvent) => Promise.resolve(void published.push(event)),
    reserveRoom: () => Promise.resolve(null),
  };
  const recorder = new EventRecorder('acme', 'proxy:pod', sink, store, { error: () => undefined });
  const deps = {
    prices: loadPriceTable(),
    metrics: createGovernanceMetrics(new Registry(), 10, () => false),
    anomalies: { observeSpend: () => undefined },
    recorder,
  } as unknown as GovernanceDeps;
  const charge = new CallCharge(
    deps,
    chargedCall((used) => void settled.push(used)),
  );
  /** Once every write the recorder started is done. */
  const written = async () => {
    await recorder.written();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { charge, published, provisional, holds, settled, written };
}

describe('a call charge', () => {
  it('charges once: a second settlement of any kind charges nothing, and nothing is held for it after', async () => {
    const { charge, published, holds, settled, written } = callCharge();
    expect(charge.settle(exact)?.usd).toBeGreaterThan(0);
    expect(charge.settled).toBe(true);
    expect(charge.settle(worst)).toBeUndefined();
    await charge.settleWhen(() => Promise.resolve(worst));
    charge.withdraw();
    charge.hold(worst);
    await written();
    expect(holds).toEqual([]);
    expect(charge.held).toBe(false);
    expect(published).toHaveLength(1);
    expect(published[0]?.data).toMatchObject({ tokens: { input: 12, output: 30 } });
    expect(settled).toHaveLength(1);
    expect(settled[0]).not.toEqual(ZERO);
  });

  it('is settled while its charge is made: a settlement meanwhile charges nothing', async () => {
    const { charge, published, settled, written } = callCharge();
    const made = Promise.withResolvers<Charge>();
    const settling = charge.settleWhen(() => made.promise);
    expect(charge.settled).toBe(true);
    expect(charge.settle(exact)).toBeUndefined();
    made.resolve(worst);
    await settling;
    await written();
    expect(published.map((event) => event.data)).toMatchObject([{ tokens: { input: 10, output: 400 } }]);
    expect(settled).toHaveLength(1);
  });

  it('withdrawn after a hold: the provisional charge is dropped, nothing charged', async () => {
    const { charge, published, provisional, settled, written } = callCharge();
    charge.hold(worst);
    expect(charge.held).toBe(true);
    await written();
    expect(provisional.size).toBe(1);
    charge.withdraw();
    await written();
    expect(provisional.size).toBe(0);
    expect(published).toEqual([]);
    expect(settled).toEqual([ZERO]);
  });

  it('settled after a hold: its charge replaces the provisional one, never charged twice', async () => {
    const { charge, published, provisional, holds, settled, written } = callCharge();
    charge.hold(worst);
    charge.hold(worst);
    await written();
    const [held] = [...provisional.keys()];
    charge.settle(exact);
    await written();
    charge.hold(worst);
    await written();
    expect(holds).toHaveLength(1);
    expect(provisional.size).toBe(0);
    expect(published.map((event) => [event.id, event.data])).toMatchObject([
      [held, { tokens: { input: 12, output: 30 } }],
    ]);
    expect(settled).toHaveLength(1);
  });

  it('a cut holds its worst case like a hold, and a later hold adds none', async () => {
    const { charge, provisional, written } = callCharge();
    const end = vi.fn();
    const upstream = { signal: new AbortController().signal, drain: vi.fn(), dispose: () => undefined };
    charge.cut(upstream, 'terminated', 'envelope ended', worst, end);
    charge.hold(exact);
    await vi.waitFor(() => expect(end).toHaveBeenCalledOnce());
    await written();
    expect(charge.held).toBe(true);
    expect([...provisional.values()].map((event) => event.data)).toMatchObject([{ tokens: { output: 400 } }]);
  });
});
