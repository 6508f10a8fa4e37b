import { describe, expect, it } from 'vitest';
import { HeldCalls } from './held-calls.ts';

describe('HeldCalls', () => {
  it('releases every call held under a tag, and only those', async () => {
    const sizes: number[] = [];
    const held = new HeldCalls<string>(10, (size) => sizes.push(size));
    const never = new AbortController().signal;
    const a1 = held.hold('a', 60_000, never);
    const a2 = held.hold('a', 60_000, never);
    const b = held.hold('b', 60_000, never);
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
    const held = new HeldCalls<string>(10, () => undefined);
    let cleaned = 0;
    const timed = held.hold('t', 50, new AbortController().signal, () => () => cleaned++);
    expect(await timed).toEqual({ outcome: 'timed_out' });
    const leaving = new AbortController();
    const cancelled = held.hold('c', 60_000, leaving.signal, () => () => cleaned++);
    leaving.abort();
    expect(await cancelled).toEqual({ outcome: 'cancelled' });
    expect(await held.hold('x', 60_000, AbortSignal.abort())).toEqual({ outcome: 'cancelled' });
    expect(cleaned).toBe(2);
    expect(held.size).toBe(0);
  });

  it('lets a hold be released from within (an answer to a re-check)', async () => {
    const held = new HeldCalls<number>(10, () => undefined);
    const answered = held.hold('r', 60_000, new AbortController().signal, (release) => {
      const timer = setTimeout(() => release(7), 10);
      return () => clearTimeout(timer);
    });
    expect(await answered).toEqual({ outcome: 'released', value: 7 });
  });

  it('says why no more can be held: full at the bound, shutdown once closed', async () => {
    const held = new HeldCalls<string>(1, () => undefined);
    expect(held.refusal()).toBeNull();
    const one = held.hold('a', 60_000, new AbortController().signal);
    expect(held.refusal()).toBe('full');
    await held.close();
    expect(await one).toEqual({ outcome: 'shutdown' });
    expect(held.refusal()).toBe('shutdown');
  });
});
