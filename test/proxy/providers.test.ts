import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost } from '../../core/metering/prices.ts';
import { metricValue } from '../proxy-net/harness.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => {
  await rig.close();
});

/** A forward-mode request (absolute URI to the proxy), as an HTTP_PROXY client sends it. */
async function forwardPost(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; text: string; envelope: string | undefined }> {
  const target = new URL(url);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: rig.addresses.proxyPort,
        method: 'POST',
        path: url,
        headers: {
          host: target.host,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            text,
            envelope: res.headers['x-svc-envelope-id'] as string | undefined,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const geminiBody = {
  contents: [{ role: 'user', parts: [{ text: 'Name some colours' }] }],
  generationConfig: { maxOutputTokens: 6 },
};

describe('Gemini and OpenAI-compatible servers are metered', () => {
  it('Gemini generateContent through reverse mode, priced from the table', async () => {
    const res = await fetch(`${rig.addresses.proxyUrl}/gemini/v1beta/models/gemini-2.0-flash:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': 'g-key', 'x-request-id': 'gem-1' },
      body: JSON.stringify(geminiBody),
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { usageMetadata: { promptTokenCount: number; candidatesTokenCount: number } };
    const sent = rig.sim.requests.at(-1)?.usageSent;
    expect(answer.usageMetadata.candidatesTokenCount).toBe(6);
    const event = await rig.usageEvent('gem-1');
    expect(event.tokens).toEqual({ input: sent?.input, output: 6 });
    expect(event.model).toBe('gemini-2.0-flash');
    expect(event.cost_usd).toBeCloseTo(rig.priced('gemini-2.0-flash', sent), 12);
    expect(event.payload).toMatchObject({ provider: 'gemini', stream: false, usage_source: 'provider' });
  });

  it('Gemini 2.5 Pro with a prompt over 200k tokens, billed wholly at its long-context tier', async () => {
    const res = await fetch(`${rig.addresses.proxyUrl}/gemini/v1beta/models/gemini-2.5-pro:generateContent`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-request-id': 'gem-long',
        // What the provider reports: the prompt of a long document.
        'x-sim-input-tokens': '250000',
      },
      body: JSON.stringify(geminiBody),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const event = await rig.usageEvent('gem-long');
    expect(event.tokens).toEqual({ input: 250_000, output: 6 });
    // 2.50 and 15 USD per million above 200k, against 1.25 and 10 below.
    expect(event.cost_usd).toBeCloseTo((250_000 * 2.5 + 6 * 15) / 1e6, 12);
  });

  it('Gemini streamGenerateContent (SSE) metered from the stream', async () => {
    const res = await fetch(
      `${rig.addresses.proxyUrl}/gemini/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': 'g-key', 'x-request-id': 'gem-2' },
        body: JSON.stringify(geminiBody),
      },
    );
    const text = await res.text();
    expect(text.match(/^data:/gm)?.length).toBeGreaterThan(1);
    const sent = rig.sim.requests.at(-1)?.usageSent;
    const event = await rig.usageEvent('gem-2');
    expect(event.tokens).toEqual({ input: sent?.input, output: 6 });
    expect(event.cost_usd).toBeCloseTo(rig.priced('gemini-2.0-flash', sent), 12);
    expect(event.payload).toMatchObject({ stream: true, usage_source: 'provider' });
  });

  it('an OpenAI-compatible server reached as a forward proxy, whole and streamed; an unknown model is priced by the rule and counted', async () => {
    const whole = await forwardPost(
      'http://compat.local:8000/v1/chat/completions',
      { model: 'llama-3-8b-instruct', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-request-id': 'compat-1' },
    );
    expect(whole.status).toBe(200);
    expect(whole.envelope).toBeDefined();
    const wholeSent = rig.sim.requests.at(-1)?.usageSent;
    if (wholeSent === undefined) throw new Error('the simulator sent no usage');
    const first = await rig.usageEvent('compat-1');
    expect(first.tokens).toEqual({ input: wholeSent.input, output: 5 });
    // No model of that provider is listed: priced at the highest rates of the whole table, never zero.
    expect(first.cost_usd).toBeGreaterThan(0);
    expect(first.cost_usd).toBe(cost(rig.prices, 'llama-3-8b-instruct', wholeSent, 'openai-compatible').costUsd);
    expect(first.payload).toMatchObject({ provider: 'openai-compatible', priced: false, price_basis: 'max_known' });

    const streamed = await forwardPost(
      'http://compat.local:8000/v1/chat/completions',
      { model: 'llama-3-8b-instruct', max_tokens: 7, stream: true, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-request-id': 'compat-2' },
    );
    expect(streamed.text).toContain('data: [DONE]');
    const second = await rig.usageEvent('compat-2');
    // Stream usage is not injected for compatible servers: the answer is counted with tiktoken.
    expect(second.tokens.output).toBe(7);
    expect(second.payload).toMatchObject({ stream: true, usage_source: 'estimated' });
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_unknown_model_calls_total', { provider: 'openai-compatible' }),
    ).toBe(2);
  });

  it('charges a call that reached the provider at least one input token: an embedding of nothing is not free', async () => {
    // Gemini answers embeddings without usage, and the empty prompt counts no token.
    const res = await fetch(`${rig.addresses.proxyUrl}/gemini/v1beta/models/gemini-2.0-flash:embedContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'gem-empty' },
      body: JSON.stringify({ content: { parts: [{ text: '' }] } }),
    });
    expect(res.status).toBe(200);
    const event = await rig.usageEvent('gem-empty');
    expect(event.tokens).toEqual({ input: 1, output: 0 });
    expect(event.cost_usd).toBe(rig.priced('gemini-2.0-flash', { input: 1, output: 0, cachedInput: 0 }));
    expect(event.cost_usd).toBeGreaterThan(0);
  });

  it('relays a plain read on a provider host free, and counts it', async () => {
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/models`, { headers: { authorization: 'Bearer sk' } });
    expect(res.status).toBe(404);
    expect(rig.sim.requests.at(-1)?.path).toBe('/v1/models');
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_unclassified_requests_total', {
        provider: 'openai',
        outcome: 'free',
      }),
    ).toBe(1);
  });
});
