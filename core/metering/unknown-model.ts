import type { ModelPrice } from './prices.ts';

/**
 * Providers billed at another provider's list prices: Azure OpenAI sells OpenAI's models, so a
 * model it names that the table lacks is priced among OpenAI's.
 */
const PRICE_FAMILY: Readonly<Record<string, string>> = { 'azure-openai': 'openai' };

/** The provider whose list prices `provider`'s calls are billed at. */
export function priceFamily(provider: string): string {
  return PRICE_FAMILY[provider] ?? provider;
}

function highest(key: string, prices: readonly ModelPrice[], asOf: string): ModelPrice {
  let inputPico = 0;
  let outputPico = 0;
  let cacheWritePico = 0;
  // A long-context tier counts: an unknown model may bill a long prompt at such rates.
  for (const p of prices) {
    inputPico = Math.max(inputPico, p.inputPico, p.longContext?.inputPico ?? 0);
    outputPico = Math.max(outputPico, p.outputPico, p.longContext?.outputPico ?? 0);
    cacheWritePico = Math.max(cacheWritePico, p.cacheWriteLongPico, p.longContext?.cacheWriteLongPico ?? 0);
  }
  cacheWritePico = Math.max(cacheWritePico, inputPico);
  // Cached input gets no discount: the model's cache price is as unknown as the model.
  return {
    key,
    provider: undefined,
    inputPico,
    outputPico,
    cachedInputPico: inputPico,
    // Writing to its cache costs at most what writing costs any known model, kept the longest.
    cacheWritePico,
    cacheWriteLongPico: cacheWritePico,
    longContext: undefined,
    priority: undefined,
    maxOutputTokens: undefined,
    asOf,
  };
}

/**
 * The `max_known` rate: per provider, the highest input and the highest output price of any
 * model the table lists for it (each on its own, so no known model of that provider costs
 * more). A provider with no listed model (an OpenAI-compatible server whose models the
 * operator has not priced) gets the highest rates of the whole table. Computed once per table.
 */
export function highestKnownRates(prices: readonly ModelPrice[]): (provider: string | undefined) => ModelPrice {
  const asOf = prices.reduce((latest, p) => (p.asOf > latest ? p.asOf : latest), '');
  const everything = highest('max_known', prices, asOf);
  const byProvider = new Map<string, ModelPrice>();
  for (const provider of new Set(prices.map((p) => p.provider))) {
    if (provider === undefined) continue;
    const own = prices.filter((p) => p.provider === provider);
    byProvider.set(provider, highest(`max_known:${provider}`, own, asOf));
  }
  return (provider) => {
    if (provider === undefined) return everything;
    return byProvider.get(priceFamily(provider)) ?? everything;
  };
}
