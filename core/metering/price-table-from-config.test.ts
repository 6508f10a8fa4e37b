import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../config/schema.ts';
import { SvcError } from '../errors/index.ts';
import { cost } from './prices.ts';
import { parseUnknownModelRule, priceTableFromConfig } from './price-table-from-config.ts';

const million = { input: 1_000_000, output: 1_000_000, cachedInput: 0 };

describe('priceTableFromConfig', () => {
  it('reads each unknown-model rule', () => {
    expect(parseUnknownModelRule('max_known')).toEqual({ mode: 'max_known' });
    expect(parseUnknownModelRule('deny')).toEqual({ mode: 'deny' });
    expect(parseUnknownModelRule('fixed:3:15')).toEqual({ mode: 'fixed', input: 3, output: 15 });
    expect(parseUnknownModelRule('fixed:0.5:1.25')).toEqual({ mode: 'fixed', input: 0.5, output: 1.25 });
  });

  it('refuses zero, and anything else, naming the key', () => {
    for (const bad of ['zero', 'fixed:1', 'fixed:a:b', 'fixed:1:2:3', '']) {
      try {
        parseUnknownModelRule(bad);
        expect.unreachable(bad);
      } catch (error) {
        expect(error).toBeInstanceOf(SvcError);
        expect((error as SvcError).fieldViolations.map((v) => v.field)).toEqual(['unknown_model_price']);
      }
    }
    const parsed = ConfigSchema.safeParse({ unknown_model_price: 'zero' });
    expect(parsed.success).toBe(false);
  });

  it('defaults to the highest known price of the provider', () => {
    const config = ConfigSchema.parse({});
    expect(config.unknown_model_price).toBe('max_known');
    const table = priceTableFromConfig(config);
    const unknown = cost(table, 'in-house-model', million, 'anthropic');
    expect(unknown).toMatchObject({ known: false, basis: 'max_known' });
    expect(unknown.costUsd).toBeGreaterThanOrEqual(cost(table, 'claude-3-opus', million).costUsd);
  });

  it('prices a fixed rule from the configuration', () => {
    const fixed = priceTableFromConfig({ unknown_model_price: 'fixed:3:15', price_overrides_file: undefined });
    expect(cost(fixed, 'in-house-model', million)).toMatchObject({ costUsd: 18, known: false, basis: 'fixed' });
  });
});
