/**
 * A function's answers, remembered for at most `limit` keys: a hit costs one Map lookup, with no
 * reordering as an LRU's has. Past the limit the oldest key is forgotten, so keys a caller makes
 * up (model ids, long prompts) cannot grow the memory. The function must not answer undefined.
 */
export class BoundedMemo<K, V extends NonNullable<unknown> | null> {
  readonly #answers = new Map<K, V>();
  readonly #limit: number;
  readonly #compute: (key: K) => V;

  constructor(limit: number, compute: (key: K) => V) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    this.#limit = limit;
    this.#compute = compute;
  }

  get size(): number {
    return this.#answers.size;
  }

  get(key: K): V {
    let answer = this.#answers.get(key);
    if (answer === undefined) {
      answer = this.#compute(key);
      if (this.#answers.size >= this.#limit) this.#answers.delete(this.#answers.keys().next().value as K);
      this.#answers.set(key, answer);
    }
    return answer;
  }

  clear(): void {
    this.#answers.clear();
  }
}
