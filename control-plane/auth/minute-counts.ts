import { BoundedLru } from '../../core/resilience/bounded-lru.ts';

export const MINUTE_MS = 60_000;

/** The wall-clock minute `ms` falls in, the same number on every replica whose clock is right. */
export function minuteOf(ms: number): number {
  return Math.floor(ms / MINUTE_MS);
}

/** What is left of the minute `ms` falls in: how long a limit reached in it holds. */
export function msLeftInMinute(ms: number): number {
  return MINUTE_MS - (ms % MINUTE_MS);
}

interface Counted {
  minute: number;
  count: number;
  /** Counts for `minute + 1`, from a replica whose clock is a little ahead of this one's. */
  ahead: number;
}

/**
 * Counts per key and wall-clock minute, for at most `capacity` keys (the least recently used key
 * is forgotten past it, so keys a client makes up cannot grow the memory). The window is the
 * calendar minute rather than a minute from a key's first count so that every replica counts a
 * failure in the same window whenever it learns of it: windows opened on each replica's first
 * sight of a key drift apart, and while one replica's window had ended another's still took the
 * failures it was told of, which then counted nowhere.
 */
export class MinuteCounts {
  readonly #keys: BoundedLru<string, Counted>;

  constructor(capacity: number) {
    this.#keys = new BoundedLru(capacity);
  }

  /** The count of `key` in `minute`, the current one. */
  count(key: string, minute: number): number {
    const counted = this.#keys.get(key);
    if (counted === undefined) return 0;
    if (counted.minute === minute) return counted.count;
    return counted.minute === minute - 1 ? counted.ahead : 0;
  }

  /**
   * Adds `count` to `key` in `minute`, while `now` is the current minute. Only the current minute
   * and the next are kept: a count of a minute that has passed can no longer refuse anything.
   */
  add(key: string, minute: number, count: number, now: number): void {
    if (minute !== now && minute !== now + 1) return;
    const counted = this.#current(key, now);
    if (minute === now) counted.count += count;
    else counted.ahead += count;
    this.#keys.set(key, counted);
  }

  #current(key: string, now: number): Counted {
    const counted = this.#keys.get(key);
    if (counted?.minute === now) return counted;
    return { minute: now, count: counted?.minute === now - 1 ? counted.ahead : 0, ahead: 0 };
  }
}
