import {
  cost,
  mostUses,
  type CostResult,
  type PriceTable,
  type ServiceTier,
  type TokenUsage,
} from '../../core/metering/prices.ts';
import type { ParsedRequest } from '../providers/index.ts';
import type { Amount } from '../enforcement/index.ts';

export interface PricedUsage extends Amount {
  usd: number;
  known: boolean;
  basis: CostResult['basis'];
}

/** The tokens a usage counts for against a reservation and a budget: input and output. */
export function billedTokens(usage: TokenUsage): number {
  return usage.input + usage.output;
}

/**
 * Prices token usage from the table at the tier the call was served at; a model the table lacks
 * falls to the unknown-model rule, among the rates of `provider` (the adapter id).
 */
export function price(
  prices: PriceTable,
  model: string,
  usage: TokenUsage,
  provider?: string,
  tier?: ServiceTier,
): PricedUsage {
  const result = cost(prices, model, usage, provider, tier);
  return {
    tokens: billedTokens(usage),
    pico: result.costPicoUsd,
    usd: result.costUsd,
    known: result.known,
    basis: result.basis,
  };
}

/**
 * The most a call can use: the prompt as counted (or as the provider reported it, if more), all
 * of it written to the prompt cache when the request marks parts for caching, the whole answer
 * bound (or what was metered, if more), and the hosted-tool uses the request allows (or those
 * seen, if more). What a call is charged when its real
 * usage cannot be read: the client left and the answer could not be drained, the connection
 * failed mid-answer, the answer was over the size bound.
 */
export function worstCase(parsed: ParsedRequest, seen?: TokenUsage): TokenUsage {
  const input = Math.max(parsed.estimatedInputTokens, seen?.input ?? 0);
  return {
    input,
    output: Math.max(parsed.maxOutputTokens, seen?.output ?? 0),
    cachedInput: 0,
    // A prompt marked for caching may all be written to the cache, at the write rate of how long it is kept.
    ...(parsed.promptCaching === 'long' ? { cacheWriteLong: input } : {}),
    ...(parsed.promptCaching === 'short' ? { cacheWrite: input } : {}),
    ...(parsed.hostedUses === undefined && seen?.hosted === undefined
      ? {}
      : { hosted: mostUses(parsed.hostedUses, seen?.hosted) }),
  };
}

/** The most a call can cost (its worst case) and the least it will. */
export function estimate(
  prices: PriceTable,
  parsed: ParsedRequest,
  provider?: string,
): { most: Amount; least: Amount } {
  const most = price(prices, parsed.model, worstCase(parsed), provider, parsed.serviceTier);
  const least = price(
    prices,
    parsed.model,
    { input: parsed.estimatedInputTokens, output: parsed.maxOutputTokens > 0 ? 1 : 0, cachedInput: 0 },
    provider,
    parsed.serviceTier,
  );
  return { most: { tokens: most.tokens, pico: most.pico }, least: { tokens: least.tokens, pico: least.pico } };
}
