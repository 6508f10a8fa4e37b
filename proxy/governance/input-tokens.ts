/**
 * A request's input tokens, counted only when needed. The request is parsed with the cheap
 * upper bound (UTF-8 bytes, `TokenCounter.bounded`); the exact tiktoken count is made at most
 * once, when something depends on it: a reservation the bound would not fit, a charge without
 * the provider's own usage, a policy that reads `estimated_input_tokens`.
 */
export class InputTokens {
  readonly bound: number;
  readonly #count: () => number;
  #exact: number | undefined;

  constructor(bound: number, count: () => number) {
    this.bound = bound;
    this.#count = count;
  }

  exact(): number {
    this.#exact ??= this.#count();
    return this.#exact;
  }

  /** The exact count once made, else the bound: for running figures that never charge. */
  current(): number {
    return this.#exact ?? this.bound;
  }

  get counted(): boolean {
    return this.#exact !== undefined;
  }
}
