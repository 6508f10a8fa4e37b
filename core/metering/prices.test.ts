import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors/index.ts';
import { buildPriceTable, cost, createCostTotal, loadPriceTable, maxOutputTokens, picoToUsd } from './prices.ts';

const table = loadPriceTable();

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

  it('prices an unknown model as zero by default and says so', () => {
    const r = cost(table, 'my-local-llama', { input: 500, output: 500, cachedInput: 0 });
    expect(r).toEqual({ costUsd: 0, costPicoUsd: 0, known: false, priceKey: null });
  });

  it('prices an unknown model with the fixed rule', () => {
    const fixed = loadPriceTable({ unknownModel: { mode: 'fixed', input: 1, output: 2 } });
    const r = cost(fixed, 'my-local-llama', { input: 1_000_000, output: 500_000, cachedInput: 0 });
    expect(r.costUsd).toBe(2);
    expect(r.known).toBe(false);
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

  it('gives the per-model answer bound or the fallback', () => {
    expect(maxOutputTokens(table, 'gpt-4o-mini', 4096)).toBe(16384);
    expect(maxOutputTokens(table, 'unknown', 4096)).toBe(4096);
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
