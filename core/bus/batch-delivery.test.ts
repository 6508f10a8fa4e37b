import { describe, expect, it } from 'vitest';
import { deliverInOrder, type Held } from './batch-delivery.ts';
import type { BusLogger, BusMessage } from './bus.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const policy = { maxDeliver: 3, backoffMs: 1, maxBackoffMs: 2 };

/** Held messages that record how each was settled. */
function held(firstAttempts: number[]): { batch: Held[]; settled: string[] } {
  const settled: string[] = [];
  const batch = firstAttempts.map((firstAttempt, seq): Held => ({
    subject: 'svc.t.events.x',
    msgId: `m${seq}`,
    seq,
    data: { seq },
    firstAttempt,
    ack: () => void settled.push(`ack m${seq}`),
    setAside: (reason, detail) => Promise.resolve(void settled.push(`aside m${seq} ${reason} ${detail}`)),
    release: () => void settled.push(`release m${seq}`),
  }));
  return { batch, settled };
}

const seqOf = (m: BusMessage): number => (m.data as { seq: number }).seq;

describe('deliverInOrder', () => {
  it('acknowledges a handled batch and sets aside the messages its handler refuses', async () => {
    const { batch, settled } = held([1, 1, 1]);
    const count = await deliverInOrder(
      batch,
      (messages) =>
        Promise.resolve(messages.filter((m) => seqOf(m) === 1).map((message) => ({ message, reason: 'x' }))),
      policy,
      quiet,
      () => false,
    );
    expect(count).toBe(3);
    expect(settled).toEqual(['ack m0', 'aside m1 refused x', 'ack m2']);
  });

  it('gives every message of a failed batch one attempt alone, even one on its last delivery', async () => {
    const { batch, settled } = held([3, 3]);
    const calls: string[] = [];
    await deliverInOrder(
      batch,
      (messages) => {
        calls.push(messages.map((m) => `${seqOf(m)}#${m.deliveryCount}`).join(','));
        return messages.length > 1 ? Promise.reject(new Error('batch')) : Promise.resolve();
      },
      policy,
      quiet,
      () => false,
    );
    expect(calls).toEqual(['0#3,1#3', '0#3', '1#3']);
    expect(settled).toEqual(['ack m0', 'ack m1']);
  });

  it('sets aside untried a message whose attempts were used up before it arrived', async () => {
    const { batch, settled } = held([4, 1]);
    const seen: number[] = [];
    await deliverInOrder(
      batch,
      (messages) => Promise.resolve(void seen.push(...messages.map(seqOf))),
      policy,
      quiet,
      () => false,
    );
    expect(seen).toEqual([1]);
    expect(settled).toEqual(['aside m0 failed delivered 3 times without being handled', 'ack m1']);
  });

  it('hands back what it has not settled when the subscriber stops, and says how far it got', async () => {
    const { batch, settled } = held([1, 1, 1]);
    let stopped = false;
    const count = await deliverInOrder(
      batch,
      (messages) => {
        if (messages.length > 1) return Promise.reject(new Error('batch'));
        stopped = true;
        return Promise.resolve();
      },
      policy,
      quiet,
      () => stopped,
    );
    expect(count).toBe(1);
    expect(settled).toEqual(['ack m0', 'release m1', 'release m2']);
  });

  it('runs a pipelined batch while the one before is delivered, and acknowledges it when it is done', async () => {
    const { batch, settled } = held([1, 1]);
    const before = Promise.withResolvers<void>();
    const applied = (): void => void settled.push('applied');
    const count = await deliverInOrder(
      batch,
      (_messages, signal) => {
        signal();
        return Promise.resolve();
      },
      policy,
      quiet,
      () => false,
      { previous: before.promise, applied },
    );
    // The batch before is still under way: this one's own success is what its acks wait for.
    expect(count).toBe(2);
    expect(settled).toEqual(['applied', 'ack m0', 'ack m1']);
  });

  it('hands a failed pipelined batch over one message at a time only after the batch before', async () => {
    const { batch, settled } = held([1, 1]);
    const before = Promise.withResolvers<void>();
    const calls: string[] = [];
    const delivery = deliverInOrder(
      batch,
      (messages) => {
        calls.push(messages.map(seqOf).join(','));
        return messages.length > 1 ? Promise.reject(new Error('batch')) : Promise.resolve();
      },
      policy,
      quiet,
      () => false,
      { previous: before.promise, applied: () => undefined },
    );
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toEqual(['0,1']);
    before.resolve();
    await delivery;
    expect(calls).toEqual(['0,1', '0', '1']);
    expect(settled).toEqual(['ack m0', 'ack m1']);
  });
});
