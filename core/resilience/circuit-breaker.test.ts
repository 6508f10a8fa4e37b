import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors/index.ts';
import { CircuitBreaker, type CircuitState } from './circuit-breaker.ts';

function setup(
  options: Partial<{
    failureThreshold: number;
    failureWindowMs: number;
    openDurationMs: number;
    successThreshold: number;
  }> = {},
) {
  const clock = { now: 0 };
  const changes: Array<[CircuitState, CircuitState]> = [];
  const breaker = new CircuitBreaker(
    { name: 'control-plane', ...options },
    { now: () => clock.now, onStateChange: (to, from) => changes.push([from, to]) },
  );
  let calls = 0;
  const ok = () => breaker.execute(() => Promise.resolve(++calls));
  const fail = () =>
    breaker.execute(() => Promise.reject(new Error(`down ${++calls}`))).catch((error: unknown) => error);
  return { clock, changes, breaker, ok, fail, calls: () => calls };
}

async function open(s: ReturnType<typeof setup>): Promise<void> {
  for (let i = 0; i < 5; i++) await s.fail();
}

describe('CircuitBreaker', () => {
  it('stays CLOSED below 5 failures in 10 s and opens at the fifth', async () => {
    const s = setup();
    for (let i = 0; i < 4; i++) await s.fail();
    expect(s.breaker.state).toBe('CLOSED');
    await s.fail();
    expect(s.breaker.state).toBe('OPEN');
    expect(s.changes).toEqual([['CLOSED', 'OPEN']]);
  });

  it('counts failures in a sliding 10 s window', async () => {
    const s = setup();
    for (let i = 0; i < 4; i++) {
      await s.fail();
      s.clock.now += 3_000;
    }
    // failures at 0, 3, 6, 9 s; at 12 s the ones at 0 and 3 s have left the window
    await s.fail();
    expect(s.breaker.state).toBe('CLOSED');
    s.clock.now += 500;
    await s.fail();
    await s.fail();
    expect(s.breaker.state).toBe('OPEN');
  });

  it('fails fast with SVC-SYS-9001 while OPEN, without calling', async () => {
    const s = setup();
    await open(s);
    const before = s.calls();
    s.clock.now += 10_000;
    const error = await s.fail();
    expect(error).toBeInstanceOf(SvcError);
    expect(error).toMatchObject({
      code: 'SVC-SYS-9001',
      details: { circuit: 'control-plane', state: 'OPEN', retry_after_ms: 20_000 },
    });
    expect(s.calls()).toBe(before);
  });

  it('turns HALF_OPEN after 30 s and lets a probe through', async () => {
    const s = setup();
    await open(s);
    s.clock.now += 29_999;
    expect(s.breaker.state).toBe('OPEN');
    s.clock.now += 1;
    expect(s.breaker.state).toBe('HALF_OPEN');
    const before = s.calls();
    await expect(s.ok()).resolves.toBe(before + 1);
  });

  it('closes after 3 consecutive successes in HALF_OPEN', async () => {
    const s = setup();
    await open(s);
    s.clock.now += 30_000;
    await s.ok();
    await s.ok();
    expect(s.breaker.state).toBe('HALF_OPEN');
    await s.ok();
    expect(s.breaker.state).toBe('CLOSED');
    expect(s.changes).toEqual([
      ['CLOSED', 'OPEN'],
      ['OPEN', 'HALF_OPEN'],
      ['HALF_OPEN', 'CLOSED'],
    ]);
    // a closed circuit starts counting failures afresh
    for (let i = 0; i < 4; i++) await s.fail();
    expect(s.breaker.state).toBe('CLOSED');
  });

  it('re-opens on a failure in HALF_OPEN and waits the full open time again', async () => {
    const s = setup();
    await open(s);
    s.clock.now += 30_000;
    await s.ok();
    await s.fail();
    expect(s.breaker.state).toBe('OPEN');
    s.clock.now += 29_000;
    expect(s.breaker.state).toBe('OPEN');
    s.clock.now += 1_000;
    expect(s.breaker.state).toBe('HALF_OPEN');
  });

  it('lets only as many concurrent probes through as it needs successes', async () => {
    const s = setup();
    await open(s);
    s.clock.now += 30_000;
    const release: Array<() => void> = [];
    const probes = [1, 2, 3].map(() => s.breaker.execute(() => new Promise<void>((resolve) => release.push(resolve))));
    await expect(s.breaker.execute(() => Promise.resolve())).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
      details: { state: 'HALF_OPEN' },
    });
    release.forEach((r) => r());
    await Promise.all(probes);
    expect(s.breaker.state).toBe('CLOSED');
  });

  it('ignores a slow failure that started before the circuit opened', async () => {
    const s = setup();
    let failLate!: (error: Error) => void;
    const late = s.breaker.execute(() => new Promise((_, reject) => (failLate = reject))).catch(() => undefined);
    await open(s);
    s.clock.now += 30_000;
    expect(s.breaker.state).toBe('HALF_OPEN');
    failLate(new Error('timeout'));
    await late;
    expect(s.breaker.state).toBe('HALF_OPEN');
  });

  it('does not count a terminal SvcError (an answer) as a failure', async () => {
    const s = setup();
    for (let i = 0; i < 6; i++) {
      await s.breaker.execute(() => Promise.reject(new SvcError('SVC-POL-2001', 'denied'))).catch(() => undefined);
    }
    expect(s.breaker.state).toBe('CLOSED');
    for (let i = 0; i < 5; i++)
      await s.breaker.execute(() => Promise.reject(new SvcError('SVC-SYS-9001', 'busy'))).catch(() => undefined);
    expect(s.breaker.state).toBe('OPEN');
  });

  it('honours configured thresholds and rejects bad ones naming the field', async () => {
    const s = setup({ failureThreshold: 2, openDurationMs: 1_000, successThreshold: 1 });
    await s.fail();
    await s.fail();
    expect(s.breaker.state).toBe('OPEN');
    s.clock.now += 1_000;
    await s.ok();
    expect(s.breaker.state).toBe('CLOSED');
    expect(() => new CircuitBreaker({ name: 'x', failureThreshold: 0 })).toThrow(
      expect.objectContaining({
        code: 'SVC-SYS-9002',
        fieldViolations: [expect.objectContaining({ field: 'failureThreshold' })],
      }) as Error,
    );
  });
});
