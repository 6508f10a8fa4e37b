import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { Operation, ParsedRequest, ProviderAdapter } from '../providers/index.ts';
import { checkModelName } from './model-name.ts';

/**
 * A request's input tokens, counted only when needed. The request is parsed with the cheap
 * upper bound (UTF-8 bytes, `TokenCounter.bounded`); the exact tiktoken count is made at most
 * once, when something depends on it: a reservation the bound would not fit, a charge without
 * the provider's own usage, a policy that reads `estimated_input_tokens`. It is made with
 * `TokenCounter.exactly`, so a large request is tokenized off the event loop.
 */
export class InputTokens {
  readonly bound: number;
  readonly #count: () => number;
  readonly #tokens: TokenCounter;
  #exact: number | undefined;
  #counting: Promise<number> | undefined;

  /** `count` parses the request again; it gives the exact count when run without a bound. */
  constructor(bound: number, count: () => number, tokens: TokenCounter) {
    this.bound = bound;
    this.#count = count;
    this.#tokens = tokens;
  }

  exact(): Promise<number> {
    // Should the count fail, the bound stands in: it is never below the exact count.
    this.#counting ??= this.#tokens.exactly(this.#count).then(
      (n) => (this.#exact = n),
      () => (this.#exact = this.bound),
    );
    return this.#counting;
  }

  /** The exact count once made. */
  known(): number | undefined {
    return this.#exact;
  }

  /**
   * The count as the counter gives it now: for a function that `TokenCounter.exactly` runs (which
   * makes it exact), and the rare synchronous reader that cannot wait (the proxy's counter, which
   * tokenizes on its thread only, then answers with the bound).
   */
  within(): number {
    return this.#exact ?? this.#count();
  }

  /** The exact count once made, else the bound: for running figures that never charge. */
  current(): number {
    return this.#exact ?? this.bound;
  }

  /**
   * The text the count reads (system prompt and instructions, each message's text with the tool
   * calls and tool results in it, the declared tools), one part a line: made afresh at each call,
   * so a call holds no second copy of its prompt. No longer than the body it comes from.
   */
  text(): string {
    return this.#tokens.texts(this.#count).join('\n');
  }
}

/** Parses a request with the input tokens' bound; the exact count parses again, only if ever needed. */
export function parseBounded(
  tokens: TokenCounter,
  adapter: ProviderAdapter,
  op: Operation,
  json: unknown,
  path: string,
): { parsed: ParsedRequest; input: InputTokens } {
  const parsed = tokens.bounded(() => adapter.parseRequest(op, json, path));
  checkModelName(parsed.model);
  const count = () => adapter.parseRequest(op, json, path).estimatedInputTokens;
  return { parsed, input: new InputTokens(parsed.estimatedInputTokens, count, tokens) };
}
