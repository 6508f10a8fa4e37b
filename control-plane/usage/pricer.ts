import { chargedMicros } from '../../core/domain/index.ts';
import { cost, type PriceTable } from '../../core/metering/prices.ts';

/**
 * Prices a call whose event carries no cost: micro-dollars for the model and tokens. A model
 * the table lacks is priced by the same unknown-model rule as in the proxy, among the rates of
 * `provider` when the event names one; under `deny` (a proxy-side refusal) the usage was spent
 * already, so it is priced at the highest known rate.
 */
export type Pricer = (
  model: string,
  tokens: { input: number; output: number },
  provider?: string,
) => { costMicros: number; known: boolean };

const PICO_PER_MICRO = 1_000_000;

/** Prices from the table, in the whole micro-dollars the store keeps (`chargedMicros`). */
export function createPricer(table: PriceTable): Pricer {
  return (model, tokens, provider) => {
    const result = cost(table, model, { input: tokens.input, output: tokens.output, cachedInput: 0 }, provider);
    return { costMicros: chargedMicros(Number(result.costPicoUsd) / PICO_PER_MICRO), known: result.known };
  };
}
