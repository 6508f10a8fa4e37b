import { describe, expect, it } from 'vitest';
import { MIN_CALLS, normalCdf, predictOverrun, seasonalProfile, type RecordedCall } from './overrun.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Calls at a rate given per hour, evenly spaced inside each minute (deterministic), each costing `amount`. */
function calls(perHour: (h: number) => number, until: number, amount = 0.05): RecordedCall[] {
  const out: RecordedCall[] = [];
  for (let minute = 0; minute < until / 60_000; minute++) {
    const n = perHour(minute / 60) / 60;
    const whole = Math.floor(n) + ((minute * 7919) % 100 < (n % 1) * 100 ? 1 : 0);
    for (let i = 0; i < whole; i++) out.push({ at: minute * 60_000 + ((i + 0.5) * 60_000) / whole, amount });
  }
  return out;
}

function predict(history: RecordedCall[], now: number, limit = 100) {
  const seen = history.filter((c) => c.at <= now);
  return predictOverrun({
    limit,
    spent: seen.reduce((s, c) => s + c.amount, 0),
    now,
    periodStart: 0,
    periodEnd: DAY,
    calls: seen,
    windowStart: 0,
  });
}

describe('the Oracle predicting an overrun', () => {
  it('is certain once the limit is spent, and silent on too few calls', () => {
    expect(
      predictOverrun({ limit: 1, spent: 1, now: HOUR, periodStart: 0, periodEnd: DAY, calls: [], windowStart: 0 }),
    ).toMatchObject({ probability: 1, method: 'exhausted' });
    const few = calls(() => 2, HOUR).slice(0, MIN_CALLS - 1);
    expect(predict(few, HOUR)).toMatchObject({ probability: null, method: 'insufficient_data' });
  });

  it('gives a steady workload on course for 70 % a low probability and one on course for 130 % a high one', () => {
    // 0.05 USD a call: 58 calls an hour spend 70 USD a day, 108 an hour 130 USD.
    const under = predict(
      calls(() => 58, DAY),
      10 * HOUR,
    );
    expect(under.probability).toBeLessThan(0.05);
    expect(under.trend).toBe('steady');
    expect(under.expectedSpendAtEnd).toBeGreaterThan(60);
    expect(under.expectedSpendAtEnd).toBeLessThan(80);
    const over = predict(
      calls(() => 108, DAY),
      10 * HOUR,
    );
    expect(over.probability).toBeGreaterThan(0.9);
    expect(over.expectedExhaustionAt).toBeGreaterThan(18 * HOUR);
    expect(over.expectedExhaustionAt).toBeLessThan(20 * HOUR);
  });

  it('sees an accelerating workload coming long before it overruns, while a run-rate alone would not', () => {
    // 20 calls an hour rising by 20 each hour at 0.05 USD: t + t²/2 USD by hour t, the limit at 13.2 h.
    const rising = calls((h) => 20 + 20 * h, DAY);
    const at6 = predict(rising, 6 * HOUR);
    const spentAt6 = rising.filter((c) => c.at <= 6 * HOUR).reduce((s, c) => s + c.amount, 0);
    expect(spentAt6).toBeCloseTo(24, 0);
    // The run-rate so far would project 96 USD for the day: under the limit.
    expect((spentAt6 / 6) * 24).toBeLessThan(100);
    expect(at6.trend).toBe('accelerating');
    expect(at6.probability).toBeGreaterThan(0.8);
    expect(at6.expectedExhaustionAt).toBeGreaterThan(12 * HOUR);
    expect(at6.expectedExhaustionAt).toBeLessThan(14.5 * HOUR);
  });

  it('answers the same input the same way, also by simulation', () => {
    const few = calls(() => 6, 2 * HOUR, 1);
    const input = {
      limit: 40,
      spent: 12,
      now: 2 * HOUR,
      periodStart: 0,
      periodEnd: 6 * HOUR,
      calls: few,
      windowStart: 0,
    };
    const first = predictOverrun(input);
    expect(first.method).toBe('monte_carlo');
    expect(predictOverrun(input)).toEqual(first);
    expect(first.probability).toBeGreaterThan(0.05);
    expect(first.probability).toBeLessThan(0.95);
  });

  it('reads a burst the history knows as usual, not as a change of level', () => {
    const burst = (h: number) => (h >= 2 && h < 3 ? 300 : 30);
    const past = [1, 2, 3].map((d) => ({
      start: -d * DAY,
      end: -(d - 1) * DAY,
      calls: calls(burst, DAY).map((c) => ({ ...c, at: c.at - d * DAY })),
    }));
    const today = calls(burst, DAY);
    const seen = today.filter((c) => c.at <= 3 * HOUR);
    const input = {
      limit: 100,
      spent: seen.reduce((s, c) => s + c.amount, 0),
      now: 3 * HOUR,
      periodStart: 0,
      periodEnd: DAY,
      calls: seen,
      windowStart: 0,
    };
    const naive = predictOverrun(input);
    const informed = predictOverrun({ ...input, profile: seasonalProfile(past) });
    // The day spends 48.5 USD: the run-rate after the burst expects far more, the history about that.
    expect(naive.expectedSpendAtEnd).toBeGreaterThan(100);
    expect(informed.expectedSpendAtEnd).toBeGreaterThan(40);
    expect(informed.expectedSpendAtEnd).toBeLessThan(60);
    expect(informed.probability).toBeLessThan(0.1);
  });

  it('builds a profile only from two earlier periods or more', () => {
    const day = { start: 0, end: DAY, calls: calls(() => 10, DAY) };
    expect(seasonalProfile([day])).toEqual([]);
    const profile = seasonalProfile([day, { ...day }]);
    expect(profile).toHaveLength(48);
    expect(profile.reduce((s, v) => s + v, 0) / 48).toBeCloseTo(1, 1);
  });

  it('has a normal CDF accurate to the fourth decimal', () => {
    expect(normalCdf(0)).toBeCloseTo(0.5, 6);
    expect(normalCdf(1.96)).toBeCloseTo(0.975, 3);
    expect(normalCdf(-1.645)).toBeCloseTo(0.05, 3);
  });
});
