import { describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import { captureRaw, runMeter, splitAt } from '../../test/simulator/index.ts';
import { createGeminiAdapter } from './gemini.ts';
import { IMAGE_TOKENS } from './non-text-input.ts';
import { createOpenAiAdapter } from './openai.ts';

const fx = useAdapterFixture();
const openai = createOpenAiAdapter(fx.deps);
const gemini = createGeminiAdapter(fx.deps);

describe('legacy OpenAI completions are metered like chat', () => {
  it('counts string and token-array prompts and bounds the answer by every completion generated', () => {
    const text = fx.tokens.countText('gpt-3.5-turbo-instruct', 'Say this is a test');
    expect(
      openai.parseRequest(
        'completions',
        { model: 'gpt-3.5-turbo-instruct', prompt: 'Say this is a test', max_tokens: 7, n: 2, best_of: 3 },
        '/v1/completions',
      ),
    ).toEqual({
      model: 'gpt-3.5-turbo-instruct',
      stream: false,
      estimatedInputTokens: text,
      maxOutputTokens: 21,
      declaredTools: [],
      builtinTools: [],
    });
    const tokens = openai.parseRequest('completions', { model: 'm', prompt: [[1, 2, 3], [4]], max_tokens: 1 }, '/');
    expect(tokens.estimatedInputTokens).toBe(4);
    const unbounded = openai.parseRequest('completions', { model: 'gpt-3.5-turbo-instruct', prompt: 'x' }, '/');
    expect(unbounded.maxOutputTokens).toBe(fx.deps.defaultMaxOutputTokens('gpt-3.5-turbo-instruct'));
    expect(() => openai.parseRequest('completions', { prompt: 'no model' }, '/v1/completions')).toThrow(SvcError);
  });

  it('asks for stream usage, and meters the whole and the streamed answer', async () => {
    const body = { model: 'gpt-3.5-turbo-instruct', prompt: 'Count', max_tokens: 6, stream: true };
    const prepared = openai.prepareRequest('completions', body);
    expect(prepared).toMatchObject({ modified: true, hideStreamUsage: true });
    const raw = await captureRaw(fx.sim, '/v1/completions', prepared.body);
    const sent = fx.sim.requests.at(-1)?.usageSent;
    const run = await runMeter(
      openai.createStreamMeter('completions', body.model, { hideStreamUsage: true }),
      splitAt(raw, 3),
    );
    expect(run.last).toMatchObject({ usage: sent, usageSource: 'provider', done: true });
    expect(new TextDecoder().decode(run.forwarded)).not.toContain('"usage"');

    const counted = await captureRaw(fx.sim, '/v1/completions', body);
    const estimate = await runMeter(openai.createStreamMeter('completions', body.model, { estimatedInputTokens: 3 }), [
      counted,
    ]);
    expect(estimate.last.usage).toEqual({ input: 3, output: 6, cachedInput: 0 });

    const whole = await captureRaw(fx.sim, '/v1/completions', { ...body, stream: false });
    const json = JSON.parse(new TextDecoder().decode(whole)) as { usage: unknown; choices: unknown };
    expect(openai.readResponse('completions', json).usage.output).toBe(6);
    expect(openai.readResponse('completions', { choices: json.choices }, 2)).toMatchObject({
      usage: { input: 2, output: 6 },
      usageSource: 'estimated',
    });
  });
});

describe('legacy OpenAI completions count the inputs beside their prompt', () => {
  const model = 'gpt-3.5-turbo-instruct';
  const estimate = (body: object) =>
    openai.parseRequest('completions', { model, max_tokens: 1, ...body }, '/v1/completions').estimatedInputTokens;

  it('counts the suffix as text', () => {
    const text = fx.tokens.countText(model, 'Say this is a test');
    expect(estimate({ prompt: 'Say this is a test', suffix: 'Say this is a test' })).toBe(2 * text);
    expect(estimate({ prompt: null })).toBe(0);
  });

  it("counts vLLM's prompt embeddings at their bytes, above the tokens they stand for", () => {
    // One row of 4,096 16-bit values a token, in base64: some 11,000 bytes a token.
    const embeds = 'A'.repeat(40_000);
    expect(estimate({ prompt_embeds: embeds })).toBe(40_000);
    expect(estimate({ prompt_embeds: [embeds, embeds], prompt: [1, 2] })).toBe(80_002);
  });

  it('refuses prompt embeddings that are not base64 text, naming the field', () => {
    try {
      estimate({ prompt_embeds: [7] });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(SvcError);
      expect((err as SvcError).fieldViolations.map((v) => v.field)).toEqual(['prompt_embeds']);
    }
  });
});

describe('Gemini embeddings are metered at their prompt', () => {
  it('counts embedContent and batchEmbedContents texts, with no answer tokens', () => {
    const one = gemini.parseRequest(
      'embed',
      { content: { parts: [{ text: 'hello world' }] } },
      '/v1beta/models/gemini-embedding-001:embedContent',
    );
    const words = fx.tokens.countText('gemini-embedding-001', 'hello world');
    expect(one).toEqual({
      model: 'gemini-embedding-001',
      stream: false,
      estimatedInputTokens: words,
      maxOutputTokens: 0,
      declaredTools: [],
      builtinTools: [],
    });
    const batch = gemini.parseRequest(
      'batch_embed',
      {
        requests: [
          { content: { parts: [{ text: 'hello world' }] } },
          { content: { parts: [{ text: 'hello world' }] } },
        ],
      },
      '/v1beta/models/gemini-embedding-001:batchEmbedContents',
    );
    expect(batch.estimatedInputTokens).toBe(2 * words);
    expect(() =>
      gemini.parseRequest('embed', { requests: [] }, '/v1beta/models/gemini-embedding-001:embedContent'),
    ).toThrow(/content/);
    expect(gemini.readResponse('embed', { embedding: { values: [0.1] } }, words)).toMatchObject({
      usage: { input: words, output: 0 },
      usageSource: 'estimated',
    });
  });

  it('counts the parts that are not text as a generation request does, and the title', () => {
    const path = '/v1beta/models/gemini-embedding-2:embedContent';
    const parse = (request: object, batch = false) =>
      gemini.parseRequest(batch ? 'batch_embed' : 'embed', request, path).estimatedInputTokens;
    const embed = (parts: unknown[]) => parse({ content: { parts } });
    const unknown = fx.deps.serverContextTokens;
    const png = 'A'.repeat(300_000);
    const mp3 = 'B'.repeat(200_000);
    const fileUri = 'https://generativelanguage.googleapis.com/v1beta/files/abc';
    // An image at the image bound however many bytes encode it, in either spelling.
    expect(embed([{ inline_data: { mime_type: 'image/png', data: png } }])).toBe(IMAGE_TOKENS.gemini);
    expect(embed([{ inlineData: { mimeType: 'image/jpeg', data: png } }])).toBe(IMAGE_TOKENS.gemini);
    expect(embed([{ file_data: { file_uri: fileUri, mime_type: 'image/png' } }])).toBe(IMAGE_TOKENS.gemini);
    // Audio, video and documents, inline or by reference, at least at the allowance, inline at least at their bytes.
    expect(embed([{ inlineData: { mimeType: 'audio/mpeg', data: mp3 } }])).toBeGreaterThanOrEqual(mp3.length);
    expect(embed([{ inlineData: { mimeType: 'application/pdf', data: 'JVBER' } }])).toBeGreaterThanOrEqual(unknown);
    expect(embed([{ file_data: { file_uri: fileUri, mime_type: 'video/mp4' } }])).toBeGreaterThanOrEqual(unknown);
    expect(embed([{ fileData: { fileUri } }])).toBeGreaterThanOrEqual(unknown);
    // A part of a kind the proxy does not know, at least at the allowance.
    expect(embed([{ videoMetadata: { startOffset: '1s' }, somethingNew: {} }])).toBeGreaterThanOrEqual(unknown);
    // Text beside them, and the title of a document, are counted as text.
    const words = fx.tokens.countText('gemini-embedding-2', 'a beach at noon');
    expect(embed([{ text: 'a beach at noon' }, { inlineData: { mimeType: 'image/png', data: png } }])).toBe(
      words + IMAGE_TOKENS.gemini,
    );
    expect(parse({ content: { parts: [] }, title: 'a beach at noon' })).toBe(words);
    // Each request of a batch.
    const image = { content: { parts: [{ inlineData: { mimeType: 'image/png', data: png } }] } };
    expect(parse({ requests: [image, image, image] }, true)).toBe(3 * IMAGE_TOKENS.gemini);
    expect(() => parse({ content: { parts: [] }, title: 7 })).toThrow(/title/);
  });
});
