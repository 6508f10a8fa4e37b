/**
 * Anomaly detection on a rate against its own baseline: events (each with an amount: 1 for a
 * call, its cost for spend) are summed per interval; each closed interval updates an
 * exponentially weighted mean and variance (EWMA); the open interval's sum is an anomaly when it
 * stands `zThreshold` standard deviations above the mean and is at least `minCount`. The
 * deviation is floored at the compound Poisson one, √(mean × the average amount), and at one
 * average amount, so a perfectly regular baseline does not make one extra call an anomaly.
 * An interval whose sum reaches `ceiling` is an anomaly whatever the baseline, in the warm-up
 * too: a rate ramped up slowly trains its baseline along, and one high from the start has none.
 * Pure: time comes in with each event.
 */
export interface AnomalyOptions {
  readonly intervalMs: number;
  /** Weight of the newest interval in the baseline. */
  readonly alpha: number;
  readonly zThreshold: number;
  /** Closed intervals seen before anything is judged: a baseline needs history. */
  readonly warmupIntervals: number;
  /** The least sum (calls, or USD) an interval needs to be anomalous. */
  readonly minCount: number;
  /** The sum (calls, or USD) at which an interval is anomalous whatever its baseline; none if absent. */
  readonly ceiling?: number | undefined;
}

export interface Detection {
  readonly count: number;
  readonly baseline: number;
  readonly z: number;
  /** The ceiling the interval reached, or null when it was judged against its baseline alone. */
  readonly ceiling: number | null;
  /** Start of the interval, epoch ms. */
  readonly intervalStart: number;
}

/** Quiet intervals beyond this many in a row teach the baseline nothing more. */
const MAX_GAP_INTERVALS = 60;

export class RateBaseline {
  readonly #options: AnomalyOptions;
  #intervalStart = Number.NaN;
  #count = 0;
  #mean = 0;
  #variance = 0;
  #seen = 0;
  #flagged = false;
  #events = 0;
  #amounts = 0;

  constructor(options: AnomalyOptions) {
    this.#options = options;
  }

  /** Counts one event of `amount` at `at`; a detection the first time its interval turns anomalous. */
  observe(at: number, amount = 1): Detection | null {
    const { intervalMs } = this.#options;
    const start = Math.floor(at / intervalMs) * intervalMs;
    if (Number.isNaN(this.#intervalStart)) this.#intervalStart = start;
    if (start > this.#intervalStart) {
      const gap = Math.min(MAX_GAP_INTERVALS, (start - this.#intervalStart) / intervalMs - 1);
      this.#learn(this.#count);
      for (let i = 0; i < gap; i++) this.#learn(0);
      this.#intervalStart = start;
      this.#count = 0;
      this.#flagged = false;
    }
    this.#count += amount;
    this.#events++;
    this.#amounts += amount;
    if (this.#flagged) return null;
    const { ceiling = Number.POSITIVE_INFINITY } = this.#options;
    const over = this.#count >= ceiling;
    if (!over && (this.#seen < this.#options.warmupIntervals || this.#count < this.#options.minCount)) return null;
    const average = this.#amounts / this.#events;
    const sd = Math.sqrt(Math.max(this.#variance, this.#mean * average, average * average));
    const z = (this.#count - this.#mean) / sd;
    if (!over && z < this.#options.zThreshold) return null;
    this.#flagged = true;
    return {
      count: Math.round(this.#count * 1e6) / 1e6,
      baseline: Math.round(this.#mean * 1e4) / 1e4,
      z: Math.round(z * 100) / 100,
      ceiling: over ? ceiling : null,
      intervalStart: start,
    };
  }

  #learn(count: number): void {
    const { alpha } = this.#options;
    if (this.#seen === 0) {
      this.#mean = count;
      this.#variance = 0;
    } else {
      const delta = count - this.#mean;
      this.#mean += alpha * delta;
      this.#variance = (1 - alpha) * (this.#variance + alpha * delta * delta);
    }
    this.#seen++;
  }
}
