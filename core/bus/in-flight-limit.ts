/**
 * Counts the handlers running per key and overall, and refuses one more past either limit: a
 * flood of one tenant's requests must neither grow pending work without end nor take every
 * handler slot from the other tenants.
 */
export class InFlightLimit {
  readonly #perKey: number;
  readonly #total: number;
  readonly #running = new Map<string, number>();
  #all = 0;

  constructor(limits: { perKey: number; total: number }) {
    this.#perKey = limits.perKey;
    this.#total = limits.total;
  }

  /** Takes a slot for `key`, or says there is none; a slot taken is given back with `leave`. */
  enter(key: string): boolean {
    const running = this.#running.get(key) ?? 0;
    if (running >= this.#perKey || this.#all >= this.#total) return false;
    this.#running.set(key, running + 1);
    this.#all++;
    return true;
  }

  leave(key: string): void {
    const running = (this.#running.get(key) ?? 1) - 1;
    if (running === 0) this.#running.delete(key);
    else this.#running.set(key, running);
    this.#all--;
  }
}
