import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failure } from '../harness/failure.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => {
  await rig.close();
});

/** The OpenAI SDK's error for a refusal with 403 SVC-ADP-5003 that gives `reason`. */
function expectRefused(error: unknown, reason: string): void {
  expect(error).toBeInstanceOf(APIError);
  expect((error as APIError).status).toBe(403);
  expect((error as APIError).code).toBe('SVC-ADP-5003');
  expect((error as APIError).message).toContain(reason);
}

/** Each path, POSTed with an empty JSON object, is refused with 403 SVC-ADP-5003. */
async function expectRefusedRaw(paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status, path).toBe(403);
    expect(await res.text(), path).toContain('SVC-ADP-5003');
  }
}

describe('a Responses request in the background', () => {
  it('is refused with 403 SVC-ADP-5003 naming the field, and never reaches the provider', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-background' });
    const before = rig.sim.requests.length;
    const error = await failure(() =>
      client.responses.create({ model: 'gpt-4o', input: 'write a long report', background: true }),
    );
    expectRefused(error, 'background');
    expect(rig.sim.requests.length).toBe(before);
    // In the foreground the same request is served.
    const answer = await client.responses.create({
      model: 'gpt-4o',
      input: 'write a long report',
      background: false,
      max_output_tokens: 4,
    });
    expect(answer.status).toBe('completed');
  });
});

describe("a router's fallback models", () => {
  it('are refused with 403 SVC-ADP-5003 naming the field, in any case, and never reach the provider', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-fallbacks' });
    const before = rig.sim.requests.length;
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const fallbacks: [string, unknown][] = [
      ['models', ['gpt-4o-mini', 'o1-pro']],
      ['fallbacks', ['o1-pro']],
      ['Fallbacks', [{ 'gpt-4o-mini': ['o1-pro'] }]],
      ['context_window_fallback_dict', { 'gpt-4o-mini': 'o1-pro' }],
    ];
    for (const [field, value] of fallbacks) {
      const error = await failure(() =>
        client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 4, [field]: value }),
      );
      expectRefused(error, `${field}: a router may serve another model`);
    }
    const responses = await failure(() =>
      client.responses.create({ model: 'gpt-4o-mini', input: 'hi', models: ['o1-pro'] } as never),
    );
    expectRefused(responses, 'models: a router may serve another model');
    const legacy = await failure(() =>
      client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi', fallbacks: ['o1-pro'] } as never),
    );
    expectRefused(legacy, 'fallbacks: a router may serve another model');
    expect(rig.sim.requests.length).toBe(before);
    // Empty, the field names no other model.
    const answer = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      max_tokens: 4,
      models: null,
    } as never);
    expect(answer.choices.length).toBe(1);
  });
});

describe('a route that would take the agent around the proxy', () => {
  it('refuses an ephemeral key or a realtime session with 403 SVC-ADP-5003, never reaching the provider', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-realtime' });
    const before = rig.sim.requests.length;
    const error = await failure(() =>
      client.realtime.clientSecrets.create({ session: { type: 'realtime', model: 'gpt-realtime' } }),
    );
    expectRefused(error, 'mints a credential');
    await expectRefusedRaw([
      // WebRTC's setup: an SDP offer, the model in the query string.
      '/openai/v1/realtime?model=gpt-4o-realtime-preview',
      '/openai/v1/realtime/calls',
      '/openai/V1/Realtime/Sessions',
      '/gemini/v1alpha/auth_tokens',
    ]);
    expect(rig.sim.requests.length).toBe(before);
  });
});

describe('a request that asks the provider for another method than its own', () => {
  it('is refused with 403 SVC-ADP-5003 naming the header, never reaching the provider', async () => {
    const before = rig.sim.requests.length;
    for (const [path, header] of [
      ['/gemini/v1beta/models/gemini-2.5-pro:generateContent', 'X-HTTP-Method-Override'],
      ['/openai/v1/chat/completions', 'X-HTTP-Method'],
      ['/openai/v1/chat/completions', 'X-Method-Override'],
    ] as const) {
      const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', [header]: 'POST' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
      });
      const text = await res.text();
      expect(res.status, header).toBe(403);
      expect(text).toContain('SVC-ADP-5003');
      expect(text).toContain(`${header.toLowerCase()} is refused`);
    }
    expect(rig.sim.requests.length).toBe(before);
  });
});

describe('work the provider runs after the request returns', () => {
  it('refuses a batch through each SDK, and a batch, video or tuning job by any spelling, never reaching the provider', async () => {
    const before = rig.sim.requests.length;
    const openai = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-batch' });
    const batch = await failure(() =>
      openai.batches.create({ input_file_id: 'file-abc', endpoint: '/v1/chat/completions', completion_window: '24h' }),
    );
    expectRefused(batch, 'after the request returns');

    const anthropic = anthropicClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-batch' });
    const messageBatch = await failure(() =>
      anthropic.messages.batches.create({
        requests: [
          {
            custom_id: 'one',
            params: { model: 'claude-sonnet-4-5', max_tokens: 64000, messages: [{ role: 'user', content: 'hello' }] },
          },
        ],
      }),
    );
    expect(messageBatch).toBeInstanceOf(AnthropicError);
    expect((messageBatch as AnthropicError).status).toBe(403);
    expect(JSON.stringify((messageBatch as AnthropicError).error)).toContain('SVC-ADP-5003');

    await expectRefusedRaw([
      '/openai/V1/Batches',
      '/openai/v1/evals/eval_1/runs',
      '/openai/v1/fine_tuning/jobs',
      '/openai/v1/videos',
      '/anthropic/v1/messages%2Fbatches',
      '/gemini/v1beta/models/gemini-2.5-flash:batchGenerateContent',
      '/gemini/v1beta/models/veo-3.0-generate-001:predictLongRunning',
      '/gemini/v1beta/cachedContents',
    ]);
    expect(rig.sim.requests.length).toBe(before);
  });
});

describe('a Gemini parameter that shapes the answer (a field mask, another format, JSONP)', () => {
  const generate = '/gemini/v1beta/models/gemini-2.5-pro:generateContent';
  const body = JSON.stringify({
    contents: [{ role: 'user', parts: [{ text: 'think hard' }] }],
    generationConfig: { maxOutputTokens: 16 },
  });
  const post = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${rig.addresses.proxyUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-execution-id': 'exec-fields', ...headers },
      body,
    });

  it('is refused with 403 SVC-ADP-5003 naming it, in the query or the header, never reaching the provider', async () => {
    const before = rig.sim.requests.length;
    for (const [path, headers] of [
      // Without usageMetadata the answer's hidden thinking tokens would go uncounted.
      [`${generate}?fields=candidates`, {}],
      [`${generate}?%24fields=candidates`, {}],
      ['/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&fields=candidates', {}],
      [generate, { 'x-goog-fieldmask': 'candidates' }],
      // A protocol buffer answer or a JSONP one: its tool calls would go unjudged.
      ['/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=proto', {}],
      ['/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?%24alt=proto', {}],
      ['/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?callback=cb', {}],
      // An unclassified call is charged at the estimate of its answer's bytes: a mask would shrink it.
      ['/gemini/v1beta/models/imagen-4.0-generate-001:predict?fields=name', {}],
      // The body read in another content type than the proxy read it in.
      [`${generate}?%24ct=application%2Fx-protobuf`, {}],
    ] as const) {
      const res = await post(path, headers);
      const text = await res.text();
      expect(res.status, path).toBe(403);
      expect(text, path).toContain('SVC-ADP-5003');
      expect(text, path).toContain('leave out of the answer');
    }
    expect(rig.sim.requests.length).toBe(before);
  });

  it('is left to a plain read, which generates nothing, and a call without one is served', async () => {
    const read = await fetch(`${rig.addresses.proxyUrl}/gemini/v1beta/models?fields=models.name`);
    await read.arrayBuffer();
    expect(read.status).not.toBe(403);
    expect(rig.sim.requests.at(-1)?.path).toBe('/v1beta/models?fields=models.name');
    const served = await post(generate);
    expect(served.status).toBe(200);
    expect(await served.json()).toHaveProperty('usageMetadata');
  });
});
