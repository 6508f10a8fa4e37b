import { cost, type PriceTable, type TokenUsage } from '../../core/metering/prices.ts';
import type { ParsedRequest } from '../providers/index.ts';
import type { Amount } from '../enforcement/index.ts';

export interface PricedUsage extends Amount {
  usd: number;
  known: boolean;
}

/** Prices token usage from the table; an unknown model falls to the table's unknown-model rule. */
export function price(prices: PriceTable, model: string, usage: TokenUsage): PricedUsage {
  const result = cost(prices, model, usage);
  return { tokens: usage.input + usage.output, pico: result.costPicoUsd, usd: result.costUsd, known: result.known };
}

/** The most a call can cost (prompt as counted, answer at its bound) and the least it will. */
export function estimate(prices: PriceTable, parsed: ParsedRequest): { most: Amount; least: Amount } {
  const most = price(prices, parsed.model, {
    input: parsed.estimatedInputTokens,
    output: parsed.maxOutputTokens,
    cachedInput: 0,
  });
  const least = price(prices, parsed.model, {
    input: parsed.estimatedInputTokens,
    output: parsed.maxOutputTokens > 0 ? 1 : 0,
    cachedInput: 0,
  });
  return { most: { tokens: most.tokens, pico: most.pico }, least: { tokens: least.tokens, pico: least.pico } };
}
