import { BoundedLru } from '../../resilience/bounded-lru.ts';

/** A bounded LRU whose entries also expire: a verdict is reused for `ttlMs`, never longer. */
export class TtlCache<V> {
  readonly #entries: BoundedLru<string, { value: V; expiresAt: number }>;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(capacity: number, ttlMs: number, now: () => number = Date.now) {
    this.#entries = new BoundedLru(capacity);
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V): void {
    this.#entries.set(key, { value, expiresAt: this.#now() + this.#ttlMs });
  }
}
