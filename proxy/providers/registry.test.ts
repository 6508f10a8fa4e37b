import { describe, expect, it } from 'vitest';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { decodeText, useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import { captureRaw, runMeter, splitAt } from '../../test/simulator/index.ts';
import { sse } from '../../test/simulator/sse-writer.ts';
import { createAdapterDeps, createDefaultAdapters, createProviderRegistry } from './registry.ts';

const fx = useAdapterFixture();
const { deps } = fx;
const registry = createProviderRegistry(
  createDefaultAdapters(deps, { compatibleHosts: ['vllm.internal:8000', 'ollama'] }),
  { openai: ['llm-gateway.corp'] },
);

describe('registry', () => {
  it.each([
    ['api.openai.com', 'openai'],
    ['API.OpenAI.com:443', 'openai'],
    ['api.anthropic.com', 'anthropic'],
    ['generativelanguage.googleapis.com', 'gemini'],
    ['my-res.openai.azure.com', 'azure-openai'],
    ['vllm.internal:8000', 'openai-compatible'],
    ['ollama:11434', 'openai-compatible'],
    ['llm-gateway.corp', 'openai'],
  ])('%s → %s', (host, id) => {
    expect(registry.forHost(host)?.id).toBe(id);
  });

  it('passes other hosts through', () => {
    expect(registry.forHost('example.com')).toBeUndefined();
    expect(registry.forHost('openai.azure.com')).toBeUndefined();
    expect(registry.forHost('vllm.internal:9000')).toBeUndefined();
  });

  it('selects by reverse-mode prefix and strips it', () => {
    expect(registry.forPath('/openai/v1/chat/completions')).toMatchObject({
      adapter: { id: 'openai' },
      upstreamPath: '/v1/chat/completions',
    });
    expect(registry.forPath('/anthropic/v1/messages')?.adapter.id).toBe('anthropic');
    expect(registry.forPath('/gemini/v1beta/models/x:generateContent')?.upstreamPath).toBe(
      '/v1beta/models/x:generateContent',
    );
    expect(registry.forPath('/azure/openai/deployments/d/chat/completions?api-version=1')).toMatchObject({
      adapter: { id: 'azure-openai' },
      upstreamPath: '/openai/deployments/d/chat/completions?api-version=1',
    });
    expect(registry.forPath('/compat/v1/embeddings')?.adapter.id).toBe('openai-compatible');
    expect(registry.forPath('/openaix/v1')).toBeUndefined();
  });

  it('leaves the compatible adapter out without configured hosts', () => {
    expect(createDefaultAdapters(deps).map((a) => a.id)).toEqual(['openai', 'anthropic', 'gemini', 'azure-openai']);
  });
});

describe('Azure OpenAI', () => {
  const azure = registry.get('azure-openai');
  const path = '/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21';

  it('takes the model from the deployment when the body has none', () => {
    expect(azure?.classify('POST', path)).toBe('chat');
    expect(
      azure?.parseRequest('chat', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }, path),
    ).toMatchObject({ model: 'gpt-4o-prod', maxOutputTokens: 3 });
    expect(azure?.classify('POST', '/openai/deployments/emb/embeddings?api-version=2024-10-21')).toBe('embeddings');
  });

  it('takes the model from the deployment whatever model the body claims, as Azure serves it', () => {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 };
    expect(azure?.parseRequest('chat', body, path)).toMatchObject({ model: 'gpt-4o-prod' });
    // Azure's v1 API names no deployment in its path: the body's model is the deployment there.
    expect(azure?.parseRequest('chat', body, '/openai/v1/chat/completions')).toMatchObject({ model: 'gpt-4o-mini' });
  });

  it('does not inject stream options by default, metering the deltas instead', async () => {
    const body = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true };
    expect(azure?.prepareRequest('chat', body).modified).toBe(false);
    const raw = await captureRaw(fx.sim, path, body);
    expect(fx.sim.requests.at(-1)?.provider).toBe('azure-openai');
    const run = await runMeter(
      azure!.createStreamMeter('chat', 'gpt-4o-prod', { estimatedInputTokens: 8 }),
      splitAt(raw, 77),
    );
    expect(run.last).toMatchObject({
      usage: { input: 8, output: 4, cachedInput: 0 },
      usageSource: 'estimated',
      done: true,
    });
    expect(
      azure?.readResponse('chat', JSON.parse(decodeText(await captureRaw(fx.sim, path, { ...body, stream: false }))))
        .model,
    ).toBe('gpt-4o-prod');
  });
});

describe('OpenAI-compatible', () => {
  it('speaks the OpenAI format on its own hosts', async () => {
    const compat = registry.forHost('vllm.internal:8000');
    const raw = await captureRaw(fx.sim, '/v1/chat/completions', {
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    expect(compat?.readResponse('chat', JSON.parse(decodeText(raw)))).toMatchObject({
      usage: fx.sim.requests.at(-1)?.usageSent,
      usageSource: 'provider',
    });
    expect(compat?.prepareRequest('chat', { model: 'x', messages: [], stream: true }).modified).toBe(false);
  });
});

describe('a streamed tool call longer than the Semantic Judge reads', () => {
  it('is kept whole up to the event bound, so no condition reads a mere prefix of it', async () => {
    const deps = createAdapterDeps(fx.tokens, loadPriceTable(), { judgedTextChars: 1024, maxEventBytes: 1 << 20 });
    const openai = createDefaultAdapters(deps)[0]!;
    const args = JSON.stringify({ pad: 'x'.repeat(70_000), cmd: 'rm -rf /' });
    const chunk = (delta: object, finish: string | null = null) =>
      sse({ choices: [{ index: 0, delta, finish_reason: finish }] });
    const raw = [
      chunk({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'run_shell', arguments: '' } }] }),
      ...Array.from({ length: 8 }, (_, i) =>
        chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(i * 9000, (i + 1) * 9000) } }] }),
      ),
      chunk({}, 'tool_calls'),
      'data: [DONE]\n\n',
    ].join('');
    const run = await runMeter(openai.createStreamMeter('chat', 'gpt-4o', { estimatedInputTokens: 5 }), [
      new TextEncoder().encode(raw),
    ]);
    expect(run.last.toolCalls).toMatchObject([{ name: 'run_shell', arguments: args }]);
  });
});
