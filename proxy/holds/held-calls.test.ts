import { describe, expect, it } from 'vitest';
import { HeldBytes } from './held-bytes.ts';
import { HeldCalls } from './held-calls.ts';

describe('HeldCalls', () => {
  it('releases every call held under a tag, and only those', async () => {
    const sizes: number[] = [];
    const held = new HeldCalls<string>(10, new HeldBytes(1000), (size) => sizes.push(size));
    const never = new AbortController().signal;
    const a1 = held.hold('a', 10, 60_000, never);
    const a2 = held.hold('a', 10, 60_000, never);
    const b = held.hold('b', 10, 60_000, never);
    expect(held.size).toBe(3);
    expect(held.release('a', 'go')).toBe(2);
    expect(await a1).toEqual({ outcome: 'released', value: 'go' });
    expect(await a2).toEqual({ outcome: 'released', value: 'go' });
    expect(held.size).toBe(1);
    expect(held.release('a', 'again')).toBe(0);
    await held.close();
    expect(await b).toEqual({ outcome: 'shutdown' });
    expect(sizes.at(-1)).toBe(0);
  });

  it('ends a hold at its timeout or when its call is cancelled, and runs its cleanup once', async () => {
    const held = new HeldCalls<string>(10, new HeldBytes(1000), () => undefined);
    let cleaned = 0;
    const timed = held.hold('t', 10, 50, new AbortController().signal, () => () => cleaned++);
    expect(await timed).toEqual({ outcome: 'timed_out' });
    const leaving = new AbortController();
    const cancelled = held.hold('c', 10, 60_000, leaving.signal, () => () => cleaned++);
    leaving.abort();
    expect(await cancelled).toEqual({ outcome: 'cancelled' });
    expect(await held.hold('x', 10, 60_000, AbortSignal.abort())).toEqual({ outcome: 'cancelled' });
    expect(cleaned).toBe(2);
    expect(held.size).toBe(0);
  });

  it('lets a hold be released from within (an answer to a re-check)', async () => {
    const held = new HeldCalls<number>(10, new HeldBytes(1000), () => undefined);
    const answered = held.hold('r', 10, 60_000, new AbortController().signal, (release) => {
      const timer = setTimeout(() => release(7), 10);
      return () => clearTimeout(timer);
    });
    expect(await answered).toEqual({ outcome: 'released', value: 7 });
  });

  it('says why no more can be held: full at the bound, shutdown once closed', async () => {
    const held = new HeldCalls<string>(1, new HeldBytes(1000), () => undefined);
    expect(held.refusal(10)).toBeNull();
    const one = held.hold('a', 10, 60_000, new AbortController().signal);
    expect(held.refusal(10)).toBe('full');
    await held.close();
    expect(await one).toEqual({ outcome: 'shutdown' });
    expect(held.refusal(10)).toBe('shutdown');
  });

  it('counts the bytes held against a bound shared with other holds, and frees them when a hold ends', async () => {
    const bytes = new HeldBytes(1000);
    const approvals = new HeldCalls<string>(10, bytes, () => undefined);
    const pauses = new HeldCalls<string>(10, bytes, () => undefined);
    const leaving = new AbortController();
    const large = approvals.hold('a', 700, 60_000, leaving.signal);
    expect(bytes.used).toBe(700);
    expect(pauses.refusal(301)).toBe('bytes');
    expect(pauses.refusal(300)).toBeNull();
    leaving.abort();
    expect(await large).toEqual({ outcome: 'cancelled' });
    expect(bytes.used).toBe(0);
    expect(pauses.refusal(1000)).toBeNull();
  });
});
