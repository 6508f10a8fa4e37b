import type { Config } from '../config/schema.ts';
import { SvcError } from '../errors/index.ts';
import { loadPriceTable, type PriceTable, type UnknownModelRule } from './prices.ts';

/** `SVC_UNKNOWN_MODEL_PRICE`: `max_known`, `deny`, or `fixed:<input>:<output>` USD per million tokens. */
export function parseUnknownModelRule(value: string): UnknownModelRule {
  const [mode, input, output, ...rest] = value.split(':');
  if (value === 'max_known' || value === 'deny') return { mode: value };
  const prices = [Number(input), Number(output)];
  if (mode === 'fixed' && rest.length === 0 && input && output && prices.every((p) => Number.isFinite(p) && p >= 0)) {
    return { mode: 'fixed', input: Number(input), output: Number(output) };
  }
  throw new SvcError(
    'SVC-SYS-9002',
    `unknown_model_price: ${JSON.stringify(value)} is not max_known, deny or fixed:<input>:<output>`,
    { fields: 'unknown_model_price' },
    [{ field: 'unknown_model_price', description: 'max_known, deny or fixed:<input>:<output>' }],
  );
}

/** The price table every process uses: the shipped table, the override file, the unknown-model rule. */
export function priceTableFromConfig(config: Pick<Config, 'unknown_model_price' | 'price_overrides_file'>): PriceTable {
  return loadPriceTable({
    unknownModel: parseUnknownModelRule(config.unknown_model_price),
    ...(config.price_overrides_file !== undefined ? { overridePath: config.price_overrides_file } : {}),
  });
}
