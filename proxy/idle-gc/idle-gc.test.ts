import { execFileSync } from 'node:child_process';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SIDECAR_NODE_FLAGS } from '../node-flags.ts';
import { IdleGc } from './idle-gc.ts';

const quiet = { info: vi.fn(), warn: vi.fn() };

function idleGc(idleMs: number, exposed = true) {
  const gc = exposed ? (vi.fn() as unknown as NodeJS.GCFunction) : undefined;
  const registry = new Registry();
  const idle = new IdleGc({ gc, idleMs, registry, logger: quiet });
  const collections = async () => (await registry.getSingleMetric('svc_proxy_idle_gc_total')!.get()).values[0]!.value;
  return { idle, gc: gc as unknown as ReturnType<typeof vi.fn>, collections };
}

describe('IdleGc', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    quiet.info.mockClear();
    quiet.warn.mockClear();
  });
  afterEach(() => vi.useRealTimers());

  it('collects once, idleMs after the last request in flight ended, with the heap-shrinking flavor', async () => {
    const { idle, gc, collections } = idleGc(1000);
    const a = idle.begin();
    const b = idle.begin();
    a();
    vi.advanceTimersByTime(5000);
    expect(gc).not.toHaveBeenCalled();
    b();
    vi.advanceTimersByTime(999);
    expect(gc).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(gc).toHaveBeenCalledTimes(1);
    expect(gc).toHaveBeenCalledWith({ type: 'major', flavor: 'last-resort' });
    expect(await collections()).toBe(1);
    // Idle on: not again until a request came and went.
    vi.advanceTimersByTime(60_000);
    expect(gc).toHaveBeenCalledTimes(1);
    idle.begin()();
    vi.advanceTimersByTime(1000);
    expect(gc).toHaveBeenCalledTimes(2);
  });

  it('collects once idleMs after the start when no request came, and not while one is in flight', () => {
    const quietStart = idleGc(1000);
    vi.advanceTimersByTime(999);
    expect(quietStart.gc).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(quietStart.gc).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(60_000);
    expect(quietStart.gc).toHaveBeenCalledTimes(1);

    const busyStart = idleGc(1000);
    const first = busyStart.idle.begin();
    vi.advanceTimersByTime(5000);
    expect(busyStart.gc).not.toHaveBeenCalled();
    first();
    vi.advanceTimersByTime(1000);
    expect(busyStart.gc).toHaveBeenCalledTimes(1);
  });

  it('a request that begins before the quiet time is over puts the collection off', () => {
    const { idle, gc } = idleGc(1000);
    idle.begin()();
    vi.advanceTimersByTime(900);
    const next = idle.begin();
    vi.advanceTimersByTime(5000);
    expect(gc).not.toHaveBeenCalled();
    next();
    vi.advanceTimersByTime(1000);
    expect(gc).toHaveBeenCalledTimes(1);
  });

  it('an end reported twice counts once, so a request still in flight keeps it off', () => {
    const { idle, gc } = idleGc(1000);
    const a = idle.begin();
    const b = idle.begin();
    a();
    a();
    vi.advanceTimersByTime(5000);
    expect(gc).not.toHaveBeenCalled();
    b();
    vi.advanceTimersByTime(1000);
    expect(gc).toHaveBeenCalledTimes(1);
  });

  it('does nothing when turned off (0) or when node runs without --expose-gc, and says why in the second case', () => {
    const off = idleGc(0);
    off.idle.begin()();
    vi.advanceTimersByTime(60_000);
    expect(off.gc).not.toHaveBeenCalled();
    expect(quiet.info).not.toHaveBeenCalled();
    const withoutGc = idleGc(1000, false);
    withoutGc.idle.begin()();
    vi.advanceTimersByTime(60_000);
    expect(quiet.info).toHaveBeenCalledWith({ proxy_idle_gc_ms: 1000 }, expect.stringContaining('--expose-gc'));
  });

  it('a collection that throws is logged and the proxy goes on', async () => {
    const { idle, gc, collections } = idleGc(1000);
    gc.mockImplementationOnce(() => {
      throw new Error('no');
    });
    idle.begin()();
    expect(() => vi.advanceTimersByTime(1000)).not.toThrow();
    expect(quiet.warn).toHaveBeenCalledWith({ err: expect.any(Error) }, 'idle collection failed');
    expect(await collections()).toBe(0);
    idle.begin()();
    vi.advanceTimersByTime(1000);
    expect(await collections()).toBe(1);
  });

  it('close cancels a pending collection', () => {
    const { idle, gc } = idleGc(1000);
    idle.begin()();
    idle.close();
    vi.advanceTimersByTime(60_000);
    expect(gc).not.toHaveBeenCalled();
  });
});

describe('IdleGc with V8 under the sidecar flags', () => {
  it('gives the pages a burst left committed back to the system, where a plain full collection does not', () => {
    // A burst of short-lived objects, then a regular full collection: the heap is mostly empty
    // but its pages stay resident. The idle collection must return them.
    const script = `
      import { Registry } from 'prom-client';
      import { IdleGc } from ${JSON.stringify(new URL('./idle-gc.ts', import.meta.url).href)};
      const idle = new IdleGc({ gc: globalThis.gc, idleMs: 20, registry: new Registry(), logger: console });
      const end = idle.begin();
      let burst = [];
      for (let i = 0; i < 3e6; i++) burst.push({ i, s: 'x' + i });
      burst = null;
      globalThis.gc();
      const before = process.memoryUsage.rss();
      end();
      await new Promise((resolve) => setTimeout(resolve, 200));
      process.stdout.write(JSON.stringify({ before, after: process.memoryUsage.rss() }));
    `;
    const out = execFileSync(process.execPath, [...SIDECAR_NODE_FLAGS, '--input-type=module', '-e', script], {
      encoding: 'utf8',
      cwd: new URL('../../', import.meta.url).pathname,
    });
    const { before, after } = JSON.parse(out) as { before: number; after: number };
    expect(before - after, `RSS ${before} → ${after}`).toBeGreaterThan(100 * 1024 * 1024);
  }, 60_000);
});
