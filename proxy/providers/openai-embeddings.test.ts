import { describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import { IMAGE_TOKENS } from './non-text-input.ts';
import { createOpenAiAdapter } from './openai.ts';
import { createOpenAiCompatibleAdapter } from './openai-compatible.ts';

const fx = useAdapterFixture();
const openai = createOpenAiAdapter(fx.deps);
const compat = createOpenAiCompatibleAdapter(fx.deps, { hosts: ['vllm.local:8000'] });
const model = 'text-embedding-3-small';
const estimate = (body: object) =>
  compat.parseRequest('embeddings', { model, ...body }, '/v1/embeddings').estimatedInputTokens;

function refusal(body: object): { code: string; fields: string[] } {
  try {
    compat.parseRequest('embeddings', { model, ...body }, '/v1/embeddings');
  } catch (err) {
    expect(err).toBeInstanceOf(SvcError);
    const e = err as SvcError;
    return { code: e.code, fields: e.fieldViolations.map((v) => v.field) };
  }
  throw new Error('not refused');
}

describe('OpenAI-format embeddings count the inputs of compatible servers', () => {
  it('counts token ids at OpenAI itself as at a compatible server', () => {
    expect(openai.parseRequest('embeddings', { model, input: [[1, 2, 3], [4]] }, '/v1/embeddings')).toMatchObject({
      estimatedInputTokens: 4,
      maxOutputTokens: 0,
    });
  });

  it('counts chat messages, as vLLM embeds images and text together, as a chat request counts them', () => {
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,' + 'A'.repeat(500_000) } };
    const messages = [{ role: 'user', content: [image, { type: 'text', text: 'a beach at noon' }] }];
    const text = fx.tokens.countChatMessages(model, [{ role: 'user', content: 'a beach at noon' }]);
    expect(estimate({ messages })).toBe(text + IMAGE_TOKENS.openai);
    expect(estimate({ messages, input: 'hello world' })).toBe(
      text + IMAGE_TOKENS.openai + fx.tokens.countText(model, 'hello world'),
    );
    const file = [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }];
    expect(estimate({ messages: file })).toBeGreaterThanOrEqual(fx.deps.serverContextTokens);
  });

  it('counts the inputs a modality other than text says are media: images at the image bound, audio at least at the allowance', () => {
    const urls = ['https://example.com/a.jpg', 'https://example.com/b.jpg', 'data:image/png;base64,AAAA'];
    expect(estimate({ input: urls, modality: 'image' })).toBe(3 * IMAGE_TOKENS.openai);
    expect(estimate({ input: urls[0], modality: 'image' })).toBe(IMAGE_TOKENS.openai);
    const wav = 'data:audio/wav;base64,' + 'U'.repeat(200_000);
    expect(estimate({ input: [wav], modality: 'audio' })).toBe(Math.max(wav.length, fx.deps.serverContextTokens));
    expect(estimate({ input: ['a.mp3'], modality: 'audio' })).toBe(fx.deps.serverContextTokens);
    expect(estimate({ input: 'hello world', modality: 'text' })).toBe(fx.tokens.countText(model, 'hello world'));
  });

  it('refuses a request with neither input nor messages, or messages that are not a list, naming the field', () => {
    expect(refusal({})).toMatchObject({ code: 'SVC-SYS-9002', fields: ['input'] });
    expect(refusal({ messages: 'hi' })).toMatchObject({ code: 'SVC-SYS-9002', fields: ['messages'] });
  });
});
