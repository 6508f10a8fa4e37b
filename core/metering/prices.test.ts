import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors/index.ts';
import {
  buildPriceTable,
  cost,
  costPico,
  createCostTotal,
  DEFAULT_PRICES_PATH,
  deniesModel,
  loadPriceTable,
  maxOutputTokens,
  picoToUsd,
  type PriceFile,
} from './prices.ts';

const table = loadPriceTable();
const prices = JSON.parse(readFileSync(DEFAULT_PRICES_PATH, 'utf8')) as PriceFile;

function writeTemp(name: string, content: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'prices-'));
  const path = join(dir, name);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('price lookup', () => {
  it('finds exact ids', () => {
    expect(table.lookup('gpt-4o')?.key).toBe('gpt-4o');
    expect(table.lookup('gpt-4o-2024-05-13')?.key).toBe('gpt-4o-2024-05-13');
  });

  it('resolves dated snapshots to the longest matching prefix', () => {
    expect(table.lookup('gpt-4o-2024-08-06')?.key).toBe('gpt-4o');
    expect(table.lookup('gpt-4o-mini-2024-07-18')?.key).toBe('gpt-4o-mini');
    expect(table.lookup('claude-3-5-haiku-20241022')?.key).toBe('claude-3-5-haiku');
    expect(table.lookup('claude-sonnet-4-20250514')?.key).toBe('claude-sonnet-4');
    expect(table.lookup('claude-opus-4-1-20250805')?.key).toBe('claude-opus-4-1');
    expect(table.lookup('o3-mini-2025-01-31')?.key).toBe('o3-mini');
    expect(table.lookup('gemini-1.5-flash-8b-001')?.key).toBe('gemini-1.5-flash-8b');
  });

  it('accepts path-style and vertex-style ids', () => {
    expect(table.lookup('models/gemini-2.0-flash')?.key).toBe('gemini-2.0-flash');
    expect(table.lookup('claude-3-5-haiku@20241022')?.key).toBe('claude-3-5-haiku');
    expect(table.lookup('GPT-4o')?.key).toBe('gpt-4o');
  });

  it('does not match a prefix inside a longer name', () => {
    expect(table.lookup('gpt-4.5-preview')).toBeUndefined();
    expect(table.lookup('o10')).toBeUndefined();
    expect(table.lookup('llama3.1:8b')).toBeUndefined();
  });

  it('takes only a snapshot, an alias of the newest or a version tag for the model it follows', () => {
    expect(table.lookup('gpt-4-0613')?.key).toBe('gpt-4');
    expect(table.lookup('claude-3-5-sonnet-latest')?.key).toBe('claude-3-5-sonnet');
    expect(table.lookup('claude-sonnet-4-0')?.key).toBe('claude-sonnet-4');
    expect(table.lookup('claude-3-5-sonnet-v2@20241022')?.key).toBe('claude-3-5-sonnet');
    expect(table.lookup('gemini-2.0-flash-001')?.key).toBe('gemini-2.0-flash');
    expect(table.lookup('gpt-4o-search-preview-2025-03-11')?.key).toBe('gpt-4o-search-preview');
  });

  it('leaves a name unknown whose suffix names another model, which may cost more', () => {
    // Each was priced as the listed model before it, at a fraction of its bill.
    for (const model of [
      'gpt-5-pro',
      'gpt-4o-audio-preview',
      'gpt-4o-mini-realtime-preview',
      'gpt-4-32k',
      'gpt-3.5-turbo-instruct',
      'gemini-2.5-flash-preview-tts',
      'gemini-2.5-flash-preview-05-20',
      'openai/gpt-4o:online',
    ])
      expect(table.lookup(model), model).toBeUndefined();
    // Priced at their own list prices now that the table lists them.
    expect(table.lookup('o3-deep-research')?.key).toBe('o3-deep-research');
    expect(table.lookup('gemini-2.5-flash-image-preview')?.outputPico).toBe(30_000_000);
    const bill = (model: string) =>
      cost(table, model, { input: 1_000_000, output: 1_000_000, cachedInput: 0 }, 'openai').costUsd;
    expect(bill('gpt-5-pro')).toBeGreaterThanOrEqual(135);
  });

  it('keeps the date the prices were taken', () => {
    expect(table.lookup('gpt-4o')?.asOf).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
});

describe('cost', () => {
  it('prices input, cached input and output per million tokens', () => {
    const r = cost(table, 'gpt-4o-2024-08-06', { input: 1_000_000, output: 1_000_000, cachedInput: 400_000 });
    // 600k × 2.50 + 400k × 1.25 + 1M × 10.00
    expect(r.costUsd).toBeCloseTo(1.5 + 0.5 + 10, 12);
    expect(r).toMatchObject({ known: true, priceKey: 'gpt-4o' });
  });

  it('bills cached input at the input price when the model has no cached price', () => {
    const r = cost(table, 'gpt-4', { input: 1000, output: 0, cachedInput: 1000 });
    expect(r.costUsd).toBeCloseTo(0.03, 12);
  });

  it('prices sub-micro-dollar amounts exactly', () => {
    const r = cost(table, 'gemini-1.5-flash', { input: 1, output: 0, cachedInput: 1 });
    expect(r.costPicoUsd).toBe(18_750);
  });

  it('prices input, cached input and output of a listed model, saying it came from the table', () => {
    expect(cost(table, 'gpt-4o', { input: 1, output: 1, cachedInput: 0 })).toMatchObject({
      known: true,
      basis: 'table',
      priceKey: 'gpt-4o',
    });
  });

  it('prices the fixed rule at its rate, without any cached discount', () => {
    const fixed = loadPriceTable({ unknownModel: { mode: 'fixed', input: 1, output: 2 } });
    const r = cost(fixed, 'my-local-llama', { input: 1_000_000, output: 500_000, cachedInput: 400_000 });
    expect(r.costUsd).toBe(2);
    expect(r).toMatchObject({ known: false, basis: 'fixed', priceKey: null });
  });

  it('sums many small calls exactly to the cent', () => {
    const total = createCostTotal();
    let floatSum = 0;
    for (let i = 0; i < 100_000; i++) {
      const r = cost(table, 'gpt-4o-mini', { input: 7, output: 3, cachedInput: 0 });
      total.add(r.costPicoUsd);
      floatSum += r.costUsd;
    }
    // 100k × (7 × 0.15 + 3 × 0.60) µ$ = 100k × 2.85 µ$ = 0.285 $
    expect(total.picoUsd).toBe(285_000_000_000n);
    expect(total.usd).toBe(0.285);
    expect(floatSum).not.toBe(0.285);
  });

  it('converts large totals without losing cents', () => {
    expect(picoToUsd(123_456_789_012_345_678_901n)).toBe(123_456_789.01234567);
  });

  it('gives the same figure alone (costPico) for listed and unlisted models, cached input included', () => {
    const usage = { input: 1_234, output: 567, cachedInput: 200 };
    for (const [model, provider] of [
      ['gpt-4o-mini', 'openai'],
      ['claude-next', 'anthropic'],
      ['model-from-next-week', undefined],
    ] as const) {
      const pico = costPico(table, model, usage, provider);
      expect(pico, model).toBeGreaterThan(0);
      expect(pico, model).toBe(cost(table, model, usage, provider).costPicoUsd);
    }
  });

  it("bills a call whose input exceeds a model's long-context threshold wholly at that tier", () => {
    // Gemini 2.5 Pro: 1.25 / 10 / 0.31 per million up to 200k input tokens, 2.50 / 15 / 0.625 above.
    const at = (input: number, cachedInput = 0) =>
      cost(table, 'gemini-2.5-pro', { input, output: 1_000, cachedInput }).costPicoUsd;
    expect(at(200_000)).toBe(200_000 * 1_250_000 + 1_000 * 10_000_000);
    expect(at(200_001)).toBe(200_001 * 2_500_000 + 1_000 * 15_000_000);
    expect(at(300_000, 100_000)).toBe(200_000 * 2_500_000 + 100_000 * 625_000 + 1_000 * 15_000_000);
    // Claude Sonnet 4 with its million-token context: 6 / 22.50 above 200k.
    expect(
      cost(table, 'claude-sonnet-4-20250514', { input: 500_000, output: 2_000, cachedInput: 0 }).costUsd,
    ).toBeCloseTo(0.5 * 6 + 0.002 * 22.5, 12);
    // costPico, the figure a reservation is checked with, takes the same tier.
    expect(costPico(table, 'gemini-2.5-pro', { input: 250_000, output: 0, cachedInput: 0 })).toBe(250_000 * 2_500_000);
    // A model without such a tier keeps its rates at any length.
    expect(cost(table, 'gpt-4.1', { input: 900_000, output: 0, cachedInput: 0 }).costPicoUsd).toBe(900_000 * 2_000_000);
  });

  it('bills input written to the prompt cache at the write rate of how long it is kept', () => {
    // Claude Sonnet 4: input 3, cache reads 0.30, writes kept five minutes 3.75, kept the hour 6.
    const usage = { input: 10_000, output: 1_000, cachedInput: 1_000, cacheWrite: 2_000, cacheWriteLong: 3_000 };
    expect(cost(table, 'claude-sonnet-4', usage).costPicoUsd).toBe(
      4_000 * 3_000_000 + 1_000 * 300_000 + 2_000 * 3_750_000 + 3_000 * 6_000_000 + 1_000 * 15_000_000,
    );
    // Parts beyond the input are cut to it; a model without write rates bills writes as input.
    expect(
      cost(table, 'claude-sonnet-4', { input: 100, output: 0, cachedInput: 0, cacheWriteLong: 500 }).costPicoUsd,
    ).toBe(100 * 6_000_000);
    expect(cost(table, 'gpt-4.1', { input: 100, output: 0, cachedInput: 0, cacheWriteLong: 100 }).costPicoUsd).toBe(
      100 * 2_000_000,
    );
    // A model the table lacks writes at the dearest write rate known for its provider.
    expect(
      costPico(table, 'claude-next', { input: 100, output: 0, cachedInput: 0, cacheWrite: 100 }, 'anthropic'),
    ).toBe(100 * 30_000_000);
  });

  it('bills a call served at the priority tier at its listed priority rates, else at twice its rates', () => {
    const usage = { input: 1_000_000, output: 1_000_000, cachedInput: 200_000 };
    // GPT-5 at priority: 2.50 input, 0.25 cached, 20 output per million.
    expect(cost(table, 'gpt-5-2025-08-07', usage, 'openai', 'priority').costUsd).toBeCloseTo(
      0.8 * 2.5 + 0.2 * 0.25 + 20,
      9,
    );
    expect(cost(table, 'gpt-5', usage, 'openai', 'standard').costUsd).toBeCloseTo(0.8 * 1.25 + 0.2 * 0.125 + 10, 9);
    // GPT-5 nano lists no priority rates: twice its own.
    expect(cost(table, 'gpt-5-nano', usage, 'openai', 'priority').costPicoUsd).toBe(
      2 * cost(table, 'gpt-5-nano', usage, 'openai').costPicoUsd,
    );
    // A model the table lacks: twice the unknown-model rate.
    expect(costPico(table, 'gpt-next', usage, 'openai', 'priority')).toBe(
      2 * costPico(table, 'gpt-next', usage, 'openai'),
    );
  });

  it('adds the fee of each use of a tool the provider ran, at the tier and model the tokens are billed at', () => {
    const tokens = { input: 1_000, output: 100, cachedInput: 0 };
    const base = costPico(table, 'gpt-4.1', tokens, 'openai');
    const hosted = { web_search: 3, web_search_preview: 1, file_search: 2, code_interpreter: 1 };
    // 10 and 25 USD per thousand searches, 2.50 per thousand file searches, 0.03 per container.
    expect(costPico(table, 'gpt-4.1', { ...tokens, hosted }, 'openai')).toBe(
      base + 3 * 10_000_000_000 + 25_000_000_000 + 2 * 2_500_000_000 + 30_000_000_000,
    );
    expect(cost(table, 'gpt-4.1', { ...tokens, hosted: { web_search: 1 } }, 'openai', 'priority').costPicoUsd).toBe(
      costPico(table, 'gpt-4.1', tokens, 'openai', 'priority') + 10_000_000_000,
    );
    // Anthropic's searches at 10 per thousand, Gemini's grounded prompts at 35.
    expect(costPico(table, 'claude-next', { ...tokens, hosted: { web_search: 2 } }, 'anthropic')).toBe(
      costPico(table, 'claude-next', tokens, 'anthropic') + 2 * 10_000_000_000,
    );
    expect(costPico(table, 'gemini-2.5-flash', { ...tokens, hosted: { google_search: 1 } }, 'gemini')).toBe(
      costPico(table, 'gemini-2.5-flash', tokens, 'gemini') + 35_000_000_000,
    );
  });

  it("bills a hosted tool its provider's fee, Azure OpenAI's, and any other provider's at the dearest listed", () => {
    expect(table.toolFee('azure-openai', 'code_interpreter')).toBe(30_000_000_000);
    expect(table.toolFee('anthropic', 'web_search')).toBe(10_000_000_000);
    // Neither a compatible server nor Anthropic lists these: the dearest any provider lists.
    expect(table.toolFee('openai-compatible', 'web_search')).toBe(10_000_000_000);
    expect(table.toolFee('openai-compatible', 'google_search')).toBe(35_000_000_000);
    expect(table.toolFee('anthropic', 'web_search_preview')).toBe(25_000_000_000);
    expect(table.toolFee(undefined, 'file_search')).toBe(2_500_000_000);
    // Images by quality and longer side: 0.011 for a low 1024×1024, 0.25 for a high 1536 one.
    expect(table.toolFee('openai', 'image_low_1024')).toBe(11_000_000_000);
    expect(table.toolFee('openai', 'image_high_1536')).toBe(250_000_000_000);
  });

  it('gives the per-model answer bound or the fallback', () => {
    expect(maxOutputTokens(table, 'gpt-4o-mini', 4096)).toBe(16384);
    expect(maxOutputTokens(table, 'unknown', 4096)).toBe(4096);
  });
});

describe('unknown models are never free', () => {
  const million = { input: 1_000_000, output: 1_000_000, cachedInput: 0 };
  // A long-context tier's rates count: an unknown model may bill a long prompt at such rates.
  const highest = (provider: string) => {
    const own = Object.entries(prices.models).filter(([, e]) => e.provider === provider);
    return {
      input: Math.max(...own.map(([, e]) => Math.max(e.input, e.long_context?.input ?? 0))),
      output: Math.max(...own.map(([, e]) => Math.max(e.output, e.long_context?.output ?? 0))),
    };
  };

  it('are priced by default at the highest input and output rates listed for their provider', () => {
    for (const provider of ['openai', 'anthropic', 'gemini']) {
      const { input, output } = highest(provider);
      const r = cost(table, 'model-from-next-week', million, provider);
      expect(r.costUsd, provider).toBeCloseTo(input + output, 9);
      expect(r).toMatchObject({ known: false, basis: 'max_known', priceKey: null });
      // No listed model of that provider costs more for the same usage.
      for (const [id, entry] of Object.entries(prices.models)) {
        if (entry.provider === provider)
          expect(r.costPicoUsd).toBeGreaterThanOrEqual(cost(table, id, million).costPicoUsd);
      }
    }
  });

  it('charge cached input of an unknown model at the full input rate', () => {
    const plain = cost(table, 'claude-next', { input: 1000, output: 0, cachedInput: 0 }, 'anthropic');
    const cached = cost(table, 'claude-next', { input: 1000, output: 0, cachedInput: 1000 }, 'anthropic');
    expect(cached.costPicoUsd).toBe(plain.costPicoUsd);
  });

  it('take Azure deployments among OpenAI prices, and a provider with no listed model among all', () => {
    expect(cost(table, 'my-deployment', million, 'azure-openai').costPicoUsd).toBe(
      cost(table, 'my-deployment', million, 'openai').costPicoUsd,
    );
    const everywhere = Math.max(...['openai', 'anthropic', 'gemini'].map((p) => highest(p).output));
    const compat = cost(table, 'llama-3-8b', { input: 0, output: 1_000_000, cachedInput: 0 }, 'openai-compatible');
    expect(compat.costUsd).toBeCloseTo(everywhere, 9);
    expect(cost(table, 'llama-3-8b', million).costPicoUsd).toBe(
      cost(table, 'llama-3-8b', million, 'openai-compatible').costPicoUsd,
    );
  });

  it('follow the override file: an operator who prices their own models bounds that provider', () => {
    const overridePath = writeTemp('local.json', {
      as_of: '2026-01-01',
      models: { 'llama-3-70b': { provider: 'openai-compatible', input: 0.5, output: 0.7 } },
    });
    const local = loadPriceTable({ overridePath });
    expect(cost(local, 'llama-3-8b', million, 'openai-compatible').costUsd).toBeCloseTo(1.2, 9);
  });

  it('under deny, are refused before the call and priced at the highest known rate after it', () => {
    const deny = loadPriceTable({ unknownModel: { mode: 'deny' } });
    expect(deniesModel(deny, 'gpt-unreleased')).toBe(true);
    expect(deniesModel(deny, 'gpt-4o-2024-08-06')).toBe(false);
    expect(deniesModel(table, 'gpt-unreleased')).toBe(false);
    expect(cost(deny, 'gpt-unreleased', million, 'openai')).toEqual(cost(table, 'gpt-unreleased', million, 'openai'));
  });

  it('refuse a table with no model to take the highest price from', () => {
    expect(() =>
      buildPriceTable([{ as_of: '2026-01-01', currency: 'USD', unit: 'per_million_tokens', models: {} }]),
    ).toThrow(/lists no model/);
    const fixedOnly = buildPriceTable(
      [{ as_of: '2026-01-01', currency: 'USD', unit: 'per_million_tokens', models: {} }],
      {
        mode: 'fixed',
        input: 1,
        output: 1,
      },
    );
    expect(cost(fixedOnly, 'x', million).costUsd).toBe(2);
  });
});

describe('price table files', () => {
  it('merges an override file over the default', () => {
    const overridePath = writeTemp('override.json', {
      as_of: '2026-01-01',
      models: { 'gpt-4o': { input: 1, output: 2 }, 'acme-large': { input: 3, output: 4 } },
    });
    const merged = loadPriceTable({ overridePath });
    expect(cost(merged, 'gpt-4o', { input: 1_000_000, output: 0, cachedInput: 0 }).costUsd).toBe(1);
    expect(merged.lookup('acme-large-v2')?.asOf).toBe('2026-01-01');
    expect(merged.lookup('gpt-4o-mini')?.key).toBe('gpt-4o-mini');
  });

  it('rejects a bad entry naming the field', () => {
    const overridePath = writeTemp('bad.json', { as_of: '2026-01-01', models: { x: { input: -1, output: 1 } } });
    try {
      loadPriceTable({ overridePath });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(SvcError);
      expect((err as SvcError).code).toBe('SVC-SYS-9002');
      expect((err as SvcError).fieldViolations.map((v) => v.field)).toEqual(['models.x.input']);
    }
  });

  it("takes an override's long-context tier, and names a bad one's field", () => {
    const overridePath = writeTemp('long.json', {
      as_of: '2026-01-01',
      models: {
        'acme-long': { input: 1, output: 2, long_context: { above_input_tokens: 1_000, input: 4, output: 8 } },
      },
    });
    const merged = loadPriceTable({ overridePath });
    // Without a cached price of its own, the tier bills cached input at its input rate.
    expect(cost(merged, 'acme-long', { input: 2_000, output: 10, cachedInput: 500 }).costPicoUsd).toBe(
      2_000 * 4_000_000 + 10 * 8_000_000,
    );
    const badPath = writeTemp('bad-long.json', {
      as_of: '2026-01-01',
      models: { y: { input: 1, output: 1, long_context: { above_input_tokens: 0, input: 2, output: 2 } } },
    });
    const error = (() => {
      try {
        loadPriceTable({ overridePath: badPath });
      } catch (err) {
        return err as SvcError;
      }
      throw new Error('expected a refusal');
    })();
    expect(error.code).toBe('SVC-SYS-9002');
    expect(error.fieldViolations.map((v) => v.field)).toEqual(['models.y.long_context.above_input_tokens']);
  });

  it('merges tool fees fee by fee, and names a fee that is negative or a tool it does not know', () => {
    const overridePath = writeTemp('fees.json', {
      as_of: '2026-01-01',
      models: {},
      tool_fees: { openai: { web_search: 0.02 }, acme: { file_search: 0.004 } },
    });
    const merged = loadPriceTable({ overridePath });
    expect(merged.toolFee('openai', 'web_search')).toBe(20_000_000_000);
    expect(merged.toolFee('openai', 'file_search')).toBe(2_500_000_000);
    expect(merged.toolFee('acme', 'file_search')).toBe(4_000_000_000);
    expect(merged.toolFee('openai-compatible', 'file_search')).toBe(4_000_000_000);
    for (const [fees, field] of [
      [{ anthropic: { web_search: -0.01 } }, 'tool_fees.anthropic.web_search'],
      [{ anthropic: { web_fetch: 0.01 } }, 'tool_fees.anthropic'],
    ] as const) {
      const badPath = writeTemp('bad-fees.json', { as_of: '2026-01-01', models: {}, tool_fees: fees });
      expect(() => loadPriceTable({ overridePath: badPath })).toThrow(
        expect.objectContaining({ code: 'SVC-SYS-9002', fieldViolations: [expect.objectContaining({ field })] }),
      );
    }
  });

  it('rejects an entry without any as_of date', () => {
    expect(() =>
      buildPriceTable([{ currency: 'USD', unit: 'per_million_tokens', models: { x: { input: 1, output: 1 } } }]),
    ).toThrow(/as_of/);
  });

  it('rejects a file that is not JSON', () => {
    const overridePath = writeTemp('broken.json', '{ nope');
    expect(() => loadPriceTable({ overridePath })).toThrow(SvcError);
  });
});
