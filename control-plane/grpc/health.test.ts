import { EventEmitter } from 'node:events';
import { status, type ServerWritableStream } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { healthService, MAX_HEALTH_WATCHERS } from './health.ts';

type Handler = (...args: unknown[]) => void;

/** A Watch call as grpc-js hands it over: what it was written, and the error that ended it. */
function watchCall(service = '') {
  const state: { written: unknown[]; ended?: unknown } = { written: [] };
  const call = Object.assign(new EventEmitter(), state, {
    request: { service },
    cancelled: false,
    write(message: unknown) {
      call.written.push(message);
      return true;
    },
  });
  call.on('error', (error: unknown) => (call.ended = error));
  const cancel = () => {
    call.cancelled = true;
    call.emit('cancelled');
  };
  return { call, cancel, stream: call as unknown as ServerWritableStream<{ service: string }, object> };
}

const settle = () => vi.advanceTimersByTimeAsync(0);

afterEach(() => vi.useRealTimers());

describe('healthService', () => {
  it('asks the store at most once a second, whatever the number of callers', async () => {
    vi.useFakeTimers();
    let probes = 0;
    const health = healthService(() => Promise.resolve(++probes > 0), pino({ level: 'silent' }));
    const check = health.Check as Handler;
    const answers: unknown[] = [];
    for (let i = 0; i < 500; i++) check({ request: { service: '' } }, (_e: unknown, a: unknown) => answers.push(a));
    const watches = Array.from({ length: 200 }, () => watchCall());
    for (const w of watches) (health.Watch as Handler)(w.stream);
    await settle();
    expect(answers).toHaveLength(500);
    expect(watches.every((w) => w.call.written.length === 1)).toBe(true);
    expect(probes).toBe(1);
    await vi.advanceTimersByTimeAsync(60_000);
    // Twelve rounds of the watchers in a minute, each probing once for all of them.
    expect(probes).toBe(13);
  });

  it('tells every watcher of a change, refuses watchers past the bound, and forgets the ones that left', async () => {
    vi.useFakeTimers();
    let up = true;
    let probes = 0;
    const health = healthService(
      () => {
        probes++;
        return up ? Promise.resolve(true) : Promise.reject(new Error('storage not reachable'));
      },
      pino({ level: 'silent' }),
    );
    const watches = Array.from({ length: MAX_HEALTH_WATCHERS }, () => watchCall());
    for (const w of watches) (health.Watch as Handler)(w.stream);
    const refused = watchCall();
    (health.Watch as Handler)(refused.stream);
    expect(refused.call.ended).toMatchObject({ code: status.RESOURCE_EXHAUSTED });
    await settle();
    up = false;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(watches.every((w) => w.call.written.length === 2)).toBe(true);
    expect(watches[0]?.call.written).toEqual([{ status: 'SERVING' }, { status: 'NOT_SERVING' }]);
    for (const w of watches) w.cancel();
    const before = probes;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(probes).toBe(before);
    // Room again once they left.
    const next = watchCall();
    (health.Watch as Handler)(next.stream);
    await settle();
    expect(next.call.ended).toBeUndefined();
    expect(next.call.written).toEqual([{ status: 'NOT_SERVING' }]);
    next.cancel();
  });
});
