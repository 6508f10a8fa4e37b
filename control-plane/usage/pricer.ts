import { cost, type PriceTable } from '../../core/metering/prices.ts';

/** Prices a call whose event carries no cost: micro-dollars for the model and tokens. */
export type Pricer = (
  model: string,
  tokens: { input: number; output: number },
) => { costMicros: number; known: boolean };

const PICO_PER_MICRO = 1_000_000;

/** Prices from the table, rounded to the micro-dollar the store keeps. */
export function createPricer(table: PriceTable): Pricer {
  return (model, tokens) => {
    const result = cost(table, model, { input: tokens.input, output: tokens.output, cachedInput: 0 });
    return { costMicros: Math.round(Number(result.costPicoUsd) / PICO_PER_MICRO), known: result.known };
  };
}
