import type { Config } from '../config/schema.ts';
import { loadPriceTable, type PriceTable, type UnknownModelRule } from './prices.ts';

/** `SVC_UNKNOWN_MODEL_PRICE`: `zero`, or `fixed:<input>:<output>` USD per million tokens (the schema checks the form). */
export function parseUnknownModelRule(value: string): UnknownModelRule {
  const [mode, input, output] = value.split(':');
  if (mode === 'fixed') return { mode: 'fixed', input: Number(input), output: Number(output) };
  return { mode: 'zero' };
}

/** The price table every process uses: the shipped table, the override file, the unknown-model rule. */
export function priceTableFromConfig(config: Pick<Config, 'unknown_model_price' | 'price_overrides_file'>): PriceTable {
  return loadPriceTable({
    unknownModel: parseUnknownModelRule(config.unknown_model_price),
    ...(config.price_overrides_file !== undefined ? { overridePath: config.price_overrides_file } : {}),
  });
}
