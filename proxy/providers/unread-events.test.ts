import { describe, expect, it } from 'vitest';
import { decodeText, useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import { runMeter } from '../../test/simulator/index.ts';
import type { Operation, ProviderAdapter } from './adapter.ts';
import { createAnthropicAdapter } from './anthropic.ts';
import { createGeminiAdapter } from './gemini.ts';
import { createOpenAiAdapter } from './openai.ts';

const fx = useAdapterFixture();
const UNREAD = 'the provider sent this, and it is not JSON: it still reaches the agent';
const bytes = (text: string) => new TextEncoder().encode(text);

const dialects: [string, ProviderAdapter, Operation, string][] = [
  ['OpenAI chat', createOpenAiAdapter(fx.deps), 'chat', 'gpt-4o-mini'],
  ['OpenAI responses', createOpenAiAdapter(fx.deps), 'responses', 'gpt-4o'],
  ['Anthropic messages', createAnthropicAdapter(fx.deps), 'messages', 'claude-3-5-haiku-20241022'],
  ['Gemini', createGeminiAdapter(fx.deps), 'stream_generate', 'gemini-2.0-flash'],
];

describe('a stream event whose data is not a JSON object', () => {
  it.each(dialects)('%s: is passed on and metered as text, never at zero', async (_name, adapter, op, model) => {
    const stream = `data: ${UNREAD}\n\ndata: [1, 2, 3]\n\n`;
    const run = await runMeter(adapter.createStreamMeter(op, model, { estimatedInputTokens: 4 }), [bytes(stream)]);
    expect(decodeText(run.forwarded)).toBe(stream);
    expect(run.last.usageSource).toBe('estimated');
    // While it flows, by its bytes; at the end without the provider's usage, counted exactly.
    expect(run.progress[0]?.usage.output).toBe(Buffer.byteLength(UNREAD));
    expect(run.last.usage.output).toBe(fx.tokens.countText(model, UNREAD + '[1, 2, 3]'));
  });

  it.each(dialects)(
    '%s: a frame that is no event (comment, id, unknown field) is passed on and metered as text',
    async (_name, adapter, op, model) => {
      const frames = [`: ${UNREAD}\n\n`, 'id: 42\nretry: 10\n\n', `DATA: ${UNREAD}\n\n`];
      const run = await runMeter(adapter.createStreamMeter(op, model, { estimatedInputTokens: 4 }), [
        bytes(frames.join('')),
      ]);
      expect(decodeText(run.forwarded)).toBe(frames.join(''));
      expect(run.progress.map((p) => p.usage.output)).toEqual([
        Buffer.byteLength(frames[0]!),
        Buffer.byteLength(frames[0]! + frames[1]!),
        Buffer.byteLength(frames.join('')),
      ]);
      expect(run.last.usage.output).toBe(fx.tokens.countText(model, frames.join('')));
    },
  );

  it("gives way to the provider's final usage when one follows", async () => {
    const openai = createOpenAiAdapter(fx.deps);
    const usage = { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 };
    const stream = `data: ${UNREAD}\n\ndata: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`;
    const run = await runMeter(openai.createStreamMeter('chat', 'gpt-4o-mini'), [bytes(stream)]);
    expect(run.last).toMatchObject({ usage: { input: 5, output: 2 }, usageSource: 'provider', done: true });
  });
});
