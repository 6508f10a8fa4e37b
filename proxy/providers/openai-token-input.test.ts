import { describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import type { Operation } from './adapter.ts';
import { createOpenAiCompatibleAdapter } from './openai-compatible.ts';

const fx = useAdapterFixture();
const compat = createOpenAiCompatibleAdapter(fx.deps, { hosts: ['vllm.local:8000'] });
const model = 'text-embedding-3-small';

describe.each<[Operation, string]>([
  ['completions', 'prompt'],
  ['embeddings', 'input'],
])('%s take `%s` as text or token ids', (op, field) => {
  const parse = (value: unknown) =>
    compat.parseRequest(op, { model, max_tokens: 1, [field]: value }, `/v1/${op}`).estimatedInputTokens;

  it('counts each text, and each token id one token', () => {
    const text = fx.tokens.countText(model, 'hello world');
    expect(parse('hello world')).toBe(text);
    expect(parse(['hello world', 'hello world'])).toBe(2 * text);
    expect(parse([101, 2023, 2003, 1037, 3231])).toBe(5);
    expect(parse([[101, 2023, 2003], [1037], [3231, 102]])).toBe(6);
    expect(parse([])).toBe(0);
  });

  it('refuses any other shape with SVC-SYS-9002 naming the field', () => {
    // Objects per input (SGLang's multimodal inputs, llama.cpp's multimodal prompts), lists mixing kinds, a number.
    for (const value of [
      [{ text: 'a', image: 'https://example.com/a.jpg' }],
      { prompt_string: 'a', multimodal_data: ['AAAA'] },
      [1, 'a'],
      [[1], 'a'],
      7,
    ]) {
      try {
        parse(value);
        expect.unreachable(JSON.stringify(value));
      } catch (err) {
        expect(err).toBeInstanceOf(SvcError);
        expect((err as SvcError).code).toBe('SVC-SYS-9002');
        expect((err as SvcError).fieldViolations.map((v) => v.field)).toEqual([field]);
        expect((err as SvcError).message).toContain(`${field}: expected a string, an array of strings`);
      }
    }
  });
});
