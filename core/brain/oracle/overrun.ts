/**
 * The Oracle's overrun model: will what is left of a limit be spent before the period ends?
 *
 * Calls arrive as a Poisson process whose rate may change linearly over time (a run-rate with a
 * trend); each call spends an amount drawn from the recorded calls' amounts (cost or tokens).
 * The spend still to come is then compound Poisson: with Λ the expected number of calls left,
 * mean Λ·E[c] and variance Λ·E[c²], plus the uncertainty of Λ itself (the rate is estimated
 * from few buckets). Many calls left: a normal approximation; few: a seeded Monte Carlo over
 * Poisson counts and resampled amounts, so the same input always gives the same answer.
 */

export interface RecordedCall {
  /** Epoch milliseconds. */
  readonly at: number;
  /** What the call spent in the limit's unit (USD or tokens). */
  readonly amount: number;
}

export interface OverrunInput {
  readonly limit: number;
  /** Spent this period, recorded calls included. */
  readonly spent: number;
  readonly now: number;
  readonly periodStart: number;
  readonly periodEnd: number;
  /**
   * Calls of the period recorded from `windowStart` to `now`, any order. The rate is estimated
   * over that window; spend before it counts only through `spent`.
   */
  readonly calls: readonly RecordedCall[];
  readonly windowStart: number;
  /** Amounts of earlier calls (the lookback) that widen the amount distribution; optional. */
  readonly pastAmounts?: readonly number[];
  /** The period's usual intensity from earlier periods (`seasonalProfile`); even when absent. */
  readonly profile?: readonly number[];
}

export interface OverrunPrediction {
  /** P(spend at the period's end ≥ limit); null when the history is too thin to say. */
  readonly probability: number | null;
  readonly expectedSpendAtEnd: number;
  /** 5th and 95th percentile of the spend at the period's end (normal approximation). */
  readonly spendLow: number;
  readonly spendHigh: number;
  /** When the expected run-rate reaches the limit, epoch ms; null when it does not before the end. */
  readonly expectedExhaustionAt: number | null;
  /** Calls per hour now, by the fitted trend. */
  readonly callsPerHourNow: number;
  readonly trend: 'steady' | 'accelerating' | 'slowing';
  readonly sampleSize: number;
  readonly method: 'exhausted' | 'normal' | 'monte_carlo' | 'insufficient_data';
}

/** Fewer recorded calls than this give no probability. */
export const MIN_CALLS = 5;
const BUCKETS = 8;
/** A slope counts only when it is this many standard errors from zero. */
const TREND_T = 3;
const NORMAL_ABOVE_CALLS = 40;
/** Relative drift of a rate per observed window length ahead (a random walk's deviation). */
const DRIFT = 0.25;
const MAX_AHEAD = 48;
const INTEGRAL_STEPS = 240;
const PROFILE_BINS = 48;
const MIN_SHAPE = 0.05;
const SIMULATIONS = 4000;
const HOUR = 3_600_000;

export function predictOverrun(input: OverrunInput): OverrunPrediction {
  const { limit, spent, now, periodEnd } = input;
  const left = limit - spent;
  const remainingMs = Math.max(0, periodEnd - now);
  const window = Math.max(1, now - input.windowStart);
  const calls = input.calls.filter((c) => c.at >= input.windowStart && c.at <= now);
  const base = { sampleSize: calls.length };
  if (left <= 0)
    return {
      ...base,
      probability: 1,
      expectedSpendAtEnd: spent,
      spendLow: spent,
      spendHigh: spent,
      expectedExhaustionAt: now,
      callsPerHourNow: 0,
      trend: 'steady',
      method: 'exhausted',
    };
  const shape = shapeOf(input.profile, input.periodStart, periodEnd, input.windowStart);
  const rate = recentOrWhole(calls, input.windowStart, window, shape, now - input.windowStart + remainingMs);
  if (calls.length < MIN_CALLS)
    return {
      ...base,
      probability: null,
      expectedSpendAtEnd: spent,
      spendLow: spent,
      spendHigh: spent,
      expectedExhaustionAt: null,
      callsPerHourNow: rate.at(now - input.windowStart) * HOUR,
      trend: 'steady',
      method: 'insufficient_data',
    };
  const amounts = [...calls.map((c) => c.amount), ...(input.pastAmounts ?? [])];
  const m1 = mean(amounts);
  const m2 = mean(amounts.map((a) => a * a));
  const t0 = now - input.windowStart;
  const expectedCalls = rate.integral(t0, t0 + remainingMs);
  // The rate's own uncertainty, as the variance of the expected count over what is left: the
  // estimate's error, and a drift that grows the further ahead of the observed window we look.
  const ahead = Math.min(remainingMs / window, MAX_AHEAD);
  const countVar =
    rate.varianceAt(t0 + remainingMs / 2) * remainingMs * remainingMs + (DRIFT * expectedCalls) ** 2 * ahead;
  const meanLeft = expectedCalls * m1;
  const varLeft = expectedCalls * m2 + countVar * m1 * m1;
  const sd = Math.sqrt(varLeft);
  const probability =
    expectedCalls >= NORMAL_ABOVE_CALLS
      ? 1 - normalCdf((left - meanLeft) / Math.max(sd, Number.EPSILON))
      : simulate(left, expectedCalls, Math.sqrt(countVar), amounts, seedOf(input));
  return {
    ...base,
    probability: clamp01(probability),
    expectedSpendAtEnd: spent + meanLeft,
    spendLow: spent + Math.max(0, meanLeft - 1.645 * sd),
    spendHigh: spent + meanLeft + 1.645 * sd,
    expectedExhaustionAt: exhaustionAt(rate, m1, left, t0, remainingMs, input.windowStart),
    callsPerHourNow: Math.max(0, rate.at(t0)) * HOUR,
    trend: rate.slope > 0 ? 'accelerating' : rate.slope < 0 ? 'slowing' : 'steady',
    method: expectedCalls >= NORMAL_ABOVE_CALLS ? 'normal' : 'monte_carlo',
  };
}

interface Rate {
  /** Calls per ms at `t` ms after the window's start (never below zero). */
  at(t: number): number;
  /** Expected calls between t1 and t2. */
  integral(t1: number, t2: number): number;
  /** Variance of the estimated level at t (calls per ms, squared). */
  varianceAt(t: number): number;
  /** Of the level, calls per ms per ms; 0 unless the trend is clear. */
  readonly slope: number;
}

/**
 * The rate as level × shape: `shape(t)` is the period's usual intensity at t (1 without
 * history), the level a line fitted to the calls per bucket divided by their bucket's shape, so
 * that a burst the history knows, or the usual quiet night, is not read as a change of level.
 * The slope is kept only when it stands `TREND_T` standard errors from zero: a steady
 * workload's noise must not read as acceleration. A trend is followed ahead as far as it was
 * observed, then held: a line fitted over an hour says little about the rate a day later.
 */
function fitRate(calls: readonly RecordedCall[], start: number, window: number, shape: (t: number) => number): Rate {
  const width = window / BUCKETS;
  const counts = new Array<number>(BUCKETS).fill(0);
  for (const c of calls) {
    const i = Math.min(BUCKETS - 1, Math.floor((c.at - start) / width));
    counts[i] = (counts[i] ?? 0) + 1;
  }
  const xs = counts.map((_, i) => (i + 0.5) * width);
  const shapes = counts.map((_, i) => averageOf(shape, i * width, (i + 1) * width));
  const ys = counts.map((n, i) => n / width / Math.max(shapes[i] as number, MIN_SHAPE));
  const xBar = mean(xs);
  const yBar = mean(ys);
  const sxx = xs.reduce((s, x) => s + (x - xBar) ** 2, 0);
  const sxy = xs.reduce((s, x, i) => s + (x - xBar) * ((ys[i] as number) - yBar), 0);
  const fitted = sxy / sxx;
  const residual =
    ys.reduce((s, y, i) => s + (y - (yBar + fitted * ((xs[i] as number) - xBar))) ** 2, 0) / (BUCKETS - 2);
  // At least the Poisson variance of a bucket's rate: a perfect fit of few calls is still few calls.
  const sigma2 = Math.max(residual, yBar / width);
  const slopeSe = Math.sqrt(sigma2 / sxx);
  const slope = Math.abs(fitted) >= TREND_T * slopeSe ? fitted : 0;
  const intercept = yBar - slope * xBar;
  const horizon = window * 2;
  const level = (t: number) => Math.max(0, intercept + slope * Math.min(t, horizon));
  const at = (t: number) => level(t) * shape(t);
  return {
    slope,
    at,
    integral(t1, t2) {
      if (t2 <= t1) return 0;
      const dt = (t2 - t1) / INTEGRAL_STEPS;
      let total = 0;
      for (let i = 0; i < INTEGRAL_STEPS; i++) total += at(t1 + (i + 0.5) * dt) * dt;
      return total;
    },
    varianceAt(t) {
      return slope === 0 ? sigma2 / BUCKETS : sigma2 * (1 / BUCKETS + (Math.min(t, horizon) - xBar) ** 2 / sxx);
    },
  };
}

/**
 * The fit over the whole window, or over its last quarter when that shows a clear rise the whole
 * window dilutes (a workload that was steady for hours and took off in the last one). The
 * shorter fit's larger variance comes with it.
 */
function recentOrWhole(
  calls: readonly RecordedCall[],
  start: number,
  window: number,
  shape: (t: number) => number,
  end: number,
): Rate {
  const whole = fitRate(calls, start, window, shape);
  const recentWindow = window / 4;
  const recentStart = start + window - recentWindow;
  const recentCalls = calls.filter((c) => c.at >= recentStart);
  if (recentCalls.length < MIN_CALLS * BUCKETS) return whole;
  const offset = window - recentWindow;
  const recentFit = fitRate(recentCalls, recentStart, recentWindow, (t) => shape(t + offset));
  if (recentFit.slope <= 0) return whole;
  const recent: Rate = {
    slope: recentFit.slope,
    at: (t) => recentFit.at(t - offset),
    integral: (t1, t2) => recentFit.integral(t1 - offset, t2 - offset),
    varianceAt: (t) => recentFit.varianceAt(t - offset),
  };
  return recent.integral(window, end) > whole.integral(window, end) ? recent : whole;
}

function averageOf(f: (t: number) => number, from: number, to: number): number {
  const samples = 8;
  let total = 0;
  for (let i = 0; i < samples; i++) total += f(from + ((i + 0.5) * (to - from)) / samples);
  return total / samples;
}

/**
 * The usual intensity over a period, from the calls of earlier periods: `bins` equal parts of
 * the period, each its share of the calls relative to an even spread (mean 1). Empty without
 * at least two earlier periods with calls: one day is not a habit.
 */
export function seasonalProfile(
  past: readonly { start: number; end: number; calls: readonly RecordedCall[] }[],
  bins = PROFILE_BINS,
): number[] {
  const used = past.filter((p) => p.calls.length > 0 && p.end > p.start);
  if (used.length < 2) return [];
  const shares = new Array<number>(bins).fill(0);
  for (const period of used) {
    const length = period.end - period.start;
    for (const c of period.calls) {
      const i = Math.min(bins - 1, Math.max(0, Math.floor(((c.at - period.start) / length) * bins)));
      shares[i] = (shares[i] ?? 0) + 1 / period.calls.length / used.length;
    }
  }
  // One call's worth added to every bin: a bin no earlier period used is quiet, not impossible.
  const calls = used.reduce((n, p) => n + p.calls.length, 0);
  const prior = used.length / calls;
  return shares.map((s) => Math.max(MIN_SHAPE, ((s + prior) / (1 + prior * bins)) * bins));
}

function shapeOf(profile: readonly number[] | undefined, periodStart: number, periodEnd: number, windowStart: number) {
  if (profile === undefined || profile.length === 0) return () => 1;
  const length = periodEnd - periodStart;
  return (t: number) => {
    const at = (windowStart + t - periodStart) / length;
    const i = Math.min(profile.length - 1, Math.max(0, Math.floor(at * profile.length)));
    return profile[i] as number;
  };
}

/** When the expected spend reaches what is left: stepped, since the rate may change. */
function exhaustionAt(
  rate: Rate,
  amount: number,
  left: number,
  t0: number,
  remainingMs: number,
  start: number,
): number | null {
  const steps = 480;
  const dt = remainingMs / steps;
  let spend = 0;
  for (let i = 1; i <= steps; i++) {
    spend += rate.at(t0 + (i - 0.5) * dt) * dt * amount;
    if (spend >= left) return Math.round(start + t0 + i * dt);
  }
  return null;
}

function simulate(
  left: number,
  expected: number,
  expectedSd: number,
  amounts: readonly number[],
  seed: number,
): number {
  const random = mulberry32(seed);
  let over = 0;
  for (let s = 0; s < SIMULATIONS; s++) {
    const lambda = Math.max(0, expected + expectedSd * gaussian(random));
    const n = poisson(lambda, random);
    let total = 0;
    for (let i = 0; i < n && total < left; i++) total += amounts[Math.floor(random() * amounts.length)] as number;
    if (total >= left) over++;
  }
  return over / SIMULATIONS;
}

function poisson(lambda: number, random: () => number): number {
  if (lambda > 60) return Math.max(0, Math.round(lambda + Math.sqrt(lambda) * gaussian(random)));
  const limit = Math.exp(-lambda);
  let k = 0;
  let p = random();
  while (p > limit) {
    k++;
    p *= random();
  }
  return k;
}

function gaussian(random: () => number): number {
  const u = Math.max(random(), Number.MIN_VALUE);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/** A small seeded generator: the simulation must give the same answer for the same input. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function seedOf(input: OverrunInput): number {
  let h = 2166136261;
  for (const n of [input.limit, input.spent, input.now, input.calls.length]) {
    h ^= Math.floor(n * 1000) & 0xffffffff;
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

/** Standard normal CDF (Abramowitz–Stegun 7.1.26 through erf). */
export function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const erf =
    1 -
    ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return z >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((s, v) => s + v, 0) / values.length;
}

function clamp01(p: number): number {
  return Math.min(1, Math.max(0, p));
}
