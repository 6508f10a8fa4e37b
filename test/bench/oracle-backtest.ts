/**
 * The Oracle replayed over synthetic workloads: steady, bursty, accelerating and slowing, each
 * under and over its budget, many seeds each. Every half hour of a daily budget it predicts the
 * probability of an overrun; a warning is the first prediction at or above the threshold.
 * Prints per workload and overall: precision and recall of the warnings (a warning in a day
 * that did not overrun is a false one), the lead time (from the warning to the overrun), and the
 * Brier score of all predictions made before the overrun.
 *
 *   node test/bench/oracle-backtest.ts [--threshold 0.8] [--seeds 20]
 */
import { fileURLToPath } from 'node:url';
import { predictOverrun, seasonalProfile, type RecordedCall } from '../../core/brain/index.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const STEP = HOUR / 2;
export const LIMIT_USD = 100;

export interface Workload {
  name: string;
  /** Calls per hour at hour h of the day. */
  rate: (h: number) => number;
  /** Mean cost of a call in USD. */
  cost: number;
}

/** Scaled so a day spends `share` of the limit on average: rate(h) integrates to the calls needed. */
function scaled(name: string, share: number, shape: (h: number) => number, cost = 0.05): Workload {
  let area = 0;
  for (let h = 0; h < 24; h += 0.01) area += shape(h) * 0.01;
  const calls = (share * LIMIT_USD) / cost;
  return { name, cost, rate: (h) => (shape(h) * calls) / area };
}

const burst = (h: number) => (Math.floor(h) % 6 === 2 ? 5 : 0.6);

const steady = (h: number) => 1 + 0 * h;
const ramp = (h: number) => 0.1 + h;
const late = (h: number) => (h < 12 ? 1 : 1 + (h - 12) ** 2 / 4);
const slowing = (h: number) => 24.1 - h;

/**
 * Each workload with the habit its earlier days show: the same shape for the usual days, a
 * steady day at 70 % for the accelerating ones that overrun (today is the incident).
 */
export const WORKLOADS: readonly { workload: Workload; history: Workload; overruns: boolean }[] = [
  { workload: scaled('steady, 70 %', 0.7, steady), history: scaled('h', 0.7, steady), overruns: false },
  { workload: scaled('steady, 130 %', 1.3, steady), history: scaled('h', 0.7, steady), overruns: true },
  { workload: scaled('bursty, 75 %', 0.75, burst), history: scaled('h', 0.75, burst), overruns: false },
  { workload: scaled('bursty, 130 %', 1.3, burst), history: scaled('h', 0.75, burst), overruns: true },
  { workload: scaled('accelerating, 85 %', 0.85, ramp), history: scaled('h', 0.85, ramp), overruns: false },
  { workload: scaled('accelerating, 160 %', 1.6, ramp), history: scaled('h', 0.7, steady), overruns: true },
  { workload: scaled('accelerating late, 140 %', 1.4, late), history: scaled('h', 0.7, steady), overruns: true },
  { workload: scaled('slowing, 90 %', 0.9, slowing), history: scaled('h', 0.9, slowing), overruns: false },
];

function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** One day of calls: a Poisson process of the workload's rate (thinning), costs exponential around the mean. */
export function generateDay(workload: Workload, seed: number, start = 0): RecordedCall[] {
  const rand = random(seed);
  let peak = 0;
  for (let h = 0; h < 24; h += 0.05) peak = Math.max(peak, workload.rate(h));
  const calls: RecordedCall[] = [];
  let t = 0;
  for (;;) {
    t += (-Math.log(1 - rand()) / peak) * HOUR;
    if (t >= DAY) break;
    if (rand() * peak <= workload.rate(t / HOUR))
      calls.push({ at: start + t, amount: -Math.log(1 - rand()) * workload.cost });
  }
  return calls;
}

export interface DayResult {
  overran: boolean;
  /** Epoch ms of the overrun, or null. */
  overrunAt: number | null;
  warnedAt: number | null;
  /** (probability, outcome) of every prediction before the overrun. */
  forecasts: { p: number; outcome: number }[];
}

/** Replays a day: a prediction every half hour from the first hour on, until the overrun. */
export function replayDay(
  calls: readonly RecordedCall[],
  threshold: number,
  profile: readonly number[] = [],
  start = 0,
): DayResult {
  let spent = 0;
  let overrunAt: number | null = null;
  for (const c of calls) {
    spent += c.amount;
    if (spent >= LIMIT_USD) {
      overrunAt = c.at;
      break;
    }
  }
  const outcome = overrunAt === null ? 0 : 1;
  const forecasts: DayResult['forecasts'] = [];
  let warnedAt: number | null = null;
  for (let now = start + HOUR; now < start + DAY; now += STEP) {
    if (overrunAt !== null && now >= overrunAt) break;
    const seen = calls.filter((c) => c.at <= now);
    const prediction = predictOverrun({
      limit: LIMIT_USD,
      spent: seen.reduce((s, c) => s + c.amount, 0),
      now,
      periodStart: start,
      periodEnd: start + DAY,
      calls: seen,
      windowStart: start,
      profile,
    });
    if (prediction.probability === null) continue;
    forecasts.push({ p: prediction.probability, outcome });
    if (warnedAt === null && prediction.probability >= threshold) warnedAt = now;
  }
  return { overran: overrunAt !== null, overrunAt, warnedAt, forecasts };
}

export interface BacktestFigures {
  precision: number;
  recall: number;
  brier: number;
  leadHoursMedian: number | null;
  leadHoursMin: number | null;
  days: number;
  overrunDays: number;
  warnedDays: number;
}

export function figures(results: readonly DayResult[]): BacktestFigures {
  const warned = results.filter((r) => r.warnedAt !== null);
  const trueWarnings = warned.filter((r) => r.overran);
  const overrun = results.filter((r) => r.overran);
  const forecasts = results.flatMap((r) => r.forecasts);
  const leads = trueWarnings
    .map((r) => ((r.overrunAt as number) - (r.warnedAt as number)) / HOUR)
    .sort((a, b) => a - b);
  return {
    precision: warned.length === 0 ? 1 : trueWarnings.length / warned.length,
    recall: overrun.length === 0 ? 1 : trueWarnings.length / overrun.length,
    brier: forecasts.length === 0 ? 0 : forecasts.reduce((s, f) => s + (f.p - f.outcome) ** 2, 0) / forecasts.length,
    leadHoursMedian: leads.length === 0 ? null : (leads[Math.floor(leads.length / 2)] as number),
    leadHoursMin: leads.length === 0 ? null : (leads[0] as number),
    days: results.length,
    overrunDays: overrun.length,
    warnedDays: warned.length,
  };
}

/** Days of history the Oracle is given, when it is given any. */
export const HISTORY_DAYS = 5;

export function backtest(
  threshold: number,
  seeds: number,
  withHistory: boolean,
): { name: string; figures: BacktestFigures }[] {
  const all: DayResult[] = [];
  const rows = WORKLOADS.map(({ workload, history }, w) => {
    const results: DayResult[] = [];
    for (let seed = 1; seed <= seeds; seed++) {
      const past = withHistory
        ? Array.from({ length: HISTORY_DAYS }, (_, d) => ({
            start: -(d + 1) * DAY,
            end: -d * DAY,
            calls: generateDay(history, seed * 104_729 + d * 31 + w, -(d + 1) * DAY),
          }))
        : [];
      results.push(replayDay(generateDay(workload, seed * 7919 + w), threshold, seasonalProfile(past)));
    }
    all.push(...results);
    return { name: workload.name, figures: figures(results) };
  });
  return [...rows, { name: 'all workloads', figures: figures(all) }];
}

function arg(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const threshold = arg('--threshold', 0.8);
  const seeds = arg('--seeds', 20);
  const fmt = (n: number | null, digits = 2) => (n === null ? '-' : n.toFixed(digits));
  for (const withHistory of [false, true]) {
    console.log(
      `Oracle backtest: daily budget of ${LIMIT_USD} USD, threshold ${threshold}, ${seeds} days per workload, ${withHistory ? `${HISTORY_DAYS} earlier days as history` : 'no history'}`,
    );
    for (const { name, figures: f } of backtest(threshold, seeds, withHistory))
      console.log(
        `  ${name.padEnd(26)} overran ${String(f.overrunDays).padStart(3)}/${f.days}  warned ${String(f.warnedDays).padStart(3)}  precision ${fmt(f.precision)}  recall ${fmt(f.recall)}  lead h median ${fmt(f.leadHoursMedian, 1)} min ${fmt(f.leadHoursMin, 1)}  Brier ${fmt(f.brier, 3)}`,
      );
  }
}
