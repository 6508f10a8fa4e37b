import { describe, expect, it } from 'vitest';
import { cost } from './prices.ts';
import { parseUnknownModelRule, priceTableFromConfig } from './price-table-from-config.ts';

describe('priceTableFromConfig', () => {
  it('prices unknown models by the configured rule', () => {
    expect(parseUnknownModelRule('zero')).toEqual({ mode: 'zero' });
    expect(parseUnknownModelRule('fixed:3:15')).toEqual({ mode: 'fixed', input: 3, output: 15 });
    const fixed = priceTableFromConfig({ unknown_model_price: 'fixed:3:15', price_overrides_file: undefined });
    expect(cost(fixed, 'in-house-model', { input: 1_000_000, output: 1_000_000, cachedInput: 0 })).toMatchObject({
      costUsd: 18,
      known: false,
    });
    const zero = priceTableFromConfig({ unknown_model_price: 'zero', price_overrides_file: undefined });
    expect(cost(zero, 'in-house-model', { input: 1_000_000, output: 0, cachedInput: 0 }).costUsd).toBe(0);
  });
});
