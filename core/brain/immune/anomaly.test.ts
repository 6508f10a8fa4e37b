import { describe, expect, it } from 'vitest';
import { RateBaseline } from './anomaly.ts';

const MINUTE = 60_000;
const options = { intervalMs: MINUTE, alpha: 0.3, zThreshold: 4, warmupIntervals: 5, minCount: 10 };

/** `perMinute[i]` events spread over minute i; the detections. */
function replay(baseline: RateBaseline, perMinute: readonly number[]) {
  const detections = [];
  for (const [minute, n] of perMinute.entries())
    for (let i = 0; i < n; i++) {
      const d = baseline.observe(minute * MINUTE + (i * MINUTE) / n);
      if (d !== null) detections.push({ minute, ...d });
    }
  return detections;
}

describe('RateBaseline (EWMA and z-score)', () => {
  it('flags a burst far above the execution’s own rate, once per interval', () => {
    const detections = replay(new RateBaseline(options), [5, 6, 4, 5, 6, 5, 5, 60, 5]);
    expect(detections).toHaveLength(1);
    expect(detections[0]).toMatchObject({ minute: 7, baseline: expect.any(Number) });
    expect(detections[0]?.z).toBeGreaterThanOrEqual(4);
    expect(detections[0]?.count).toBeLessThan(60);
  });

  it('flags nothing in a steady or slowly growing workload, nor before its warm-up', () => {
    expect(replay(new RateBaseline(options), [5, 6, 4, 5, 6, 5, 5, 6, 5, 4, 6, 5])).toEqual([]);
    expect(replay(new RateBaseline(options), [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20])).toEqual([]);
    expect(replay(new RateBaseline(options), [5, 5, 200])).toEqual([]);
  });

  it('learns quiet gaps as quiet, then sees a return to a high rate as unusual', () => {
    const baseline = new RateBaseline(options);
    replay(baseline, [20, 20, 20, 20, 20, 20]);
    // Ten quiet minutes, then 40 in a minute.
    let detection = null;
    for (let i = 0; i < 40 && detection === null; i++) detection = baseline.observe(16 * MINUTE + i * 1000);
    expect(detection).not.toBeNull();
  });

  it('flags an interval that reaches the ceiling whatever the baseline: a slow ramp, and a high rate from the start', () => {
    // A quarter more each minute: the baseline follows the ramp, so the z-score alone never flags it.
    const ramp = Array.from({ length: 16 }, (_, i) => Math.round(10 * 1.25 ** i));
    expect(replay(new RateBaseline(options), ramp)).toEqual([]);
    const ceiled = replay(new RateBaseline({ ...options, ceiling: 200 }), ramp);
    expect(ceiled).toHaveLength(ramp.filter((n) => n >= 200).length);
    expect(ceiled[0]).toMatchObject({ minute: ramp.findIndex((n) => n >= 200), count: 200, ceiling: 200 });
    expect(ceiled[0]!.z).toBeLessThan(4);
    // In the warm-up, with no baseline yet.
    expect(replay(new RateBaseline({ ...options, ceiling: 200 }), [300])).toMatchObject([
      { minute: 0, count: 200, ceiling: 200 },
    ]);
    expect(replay(new RateBaseline({ ...options, ceiling: 200 }), [5, 6, 4, 5, 6, 5, 5, 60, 5])).toMatchObject([
      { minute: 7, ceiling: null },
    ]);
  });
});
