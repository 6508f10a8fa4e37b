import { gzipSync } from 'node:zlib';
import { APIError as AnthropicApiError } from '@anthropic-ai/sdk';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { cost } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { eventually } from '../harness/control-plane.ts';
import { metricValue } from '../proxy-net/harness.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

const tokens = createTokenCounter();
afterAll(() => tokens.free());

const messages = [{ role: 'user' as const, content: 'hello' }];
const eventFor = (rig: ProxyRig, requestId: string) =>
  rig.cp.published.find((m) => (m.data as UsageEventMessage).payload?.request_id === requestId);

async function post(rig: ProxyRig, path: string, body: unknown, requestId: string) {
  const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer sk',
      'x-request-id': requestId,
      'x-svc-execution-id': `exec-${requestId}`,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

describe('by default', () => {
  let rig: ProxyRig;
  beforeAll(async () => {
    rig = await startProxyRig();
  });
  afterAll(async () => rig.close());

  it('meters a request outside every route by the token estimate of request and answer, at the highest known rate', async () => {
    const body = { prompt: 'a lighthouse at dusk', n: 1, size: '1024x1024' };
    const answer = await post(rig, '/openai/v1/images/generations', body, 'image-1');
    expect(answer.status).toBe(200);
    expect(rig.sim.requests.at(-1)?.path).toBe('/v1/images/generations');

    const event = await rig.usageEvent('image-1');
    const expected = {
      input: tokens.countText('', JSON.stringify(body)),
      output: tokens.countText('', answer.text),
    };
    expect(event.tokens).toEqual(expected);
    expect(event.model).toBeNull();
    expect(event.cost_usd).toBeGreaterThan(0);
    expect(event.cost_usd).toBe(cost(rig.prices, 'no-model', { ...expected, cachedInput: 0 }, 'openai').costUsd);
    expect(event.payload).toMatchObject({
      operation: 'unclassified',
      path: '/v1/images/generations',
      method: 'POST',
      charged: 'estimate',
      price_basis: 'max_known',
      aborted: false,
    });
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_unclassified_requests_total', {
        provider: 'openai',
        outcome: 'metered',
      }),
    ).toBe(1);
  });

  it('does not take a path that merely ends like a route for that route', async () => {
    const chat = { model: 'gpt-4o-mini', max_tokens: 5, messages };
    const chatCalls = { provider: 'openai', model: 'gpt-4o-mini', decision: 'allowed' };
    const before = await metricValue(rig.proxy.registry, 'svc_proxy_requests_total', chatCalls);
    const answer = await post(rig, '/openai/v1/files/x/chat/completions', chat, 'walk-around');
    // The simulator, which knows the real routes, has no such route; the proxy governed it as unclassified.
    expect(answer.status).toBe(404);
    expect(rig.sim.requests.at(-1)?.path).toBe('/v1/files/x/chat/completions');
    expect(await metricValue(rig.proxy.registry, 'svc_proxy_requests_total', chatCalls)).toBe(before);
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_unclassified_requests_total', {
        provider: 'openai',
        outcome: 'metered',
      }),
    ).toBe(2);
  });

  it('counts a compressed body as what it holds, and sends the provider that, without the coding', async () => {
    const body = { prompt: 'a lighthouse at dusk, '.repeat(40) };
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-request-id': 'image-gzip' },
      body: gzipSync(JSON.stringify(body)),
    });
    expect(res.status).toBe(200);
    const seen = rig.sim.requests.at(-1);
    expect(seen?.headers['content-encoding']).toBeUndefined();
    expect(seen?.json).toEqual(body);
    const event = await rig.usageEvent('image-gzip');
    expect(event.tokens.input).toBe(tokens.countText('', JSON.stringify(body)));
  });

  it('refuses a body labelled with a coding it is not in, in the provider format', async () => {
    const before = rig.sim.requests.length;
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: JSON.stringify({ prompt: 'a lighthouse at dusk' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SVC-SYS-9002');
    expect(rig.sim.requests.length).toBe(before);
  });

  it.each([
    ['OpenAI', '/openai/v1/responses/compact', { model: 'gpt-4o-mini', tools: [{ type: 'web_search' }] }, 'tools'],
    [
      'Anthropic',
      '/anthropic/v1/messages/batches/x',
      { model: 'claude-3-5-haiku-20241022', mcp_servers: [{ type: 'url', url: 'https://mcp.example.com' }] },
      'mcp_servers',
    ],
    ['OpenAI', '/openai/v1/images/edits', { model: 'gpt-image-1', Functions: [{ name: 'shell' }] }, 'Functions'],
  ])(
    'refuses an unrouted %s call whose body declares tools it could not judge, sending nothing',
    async (_provider, path, body, key) => {
      const before = rig.sim.requests.length;
      const answer = await post(rig, path, body, `tools-${key}`);
      expect(answer.status).toBe(403);
      expect(answer.text).toContain('SVC-ADP-5003');
      expect(answer.text).toContain(`declares tools (${key})`);
      expect(rig.sim.requests.length).toBe(before);
      expect(eventFor(rig, `tools-${key}`)).toBeUndefined();
    },
  );

  it('meters an unrouted call whose tools are declared empty', async () => {
    const answer = await post(
      rig,
      '/openai/v1/images/generations',
      { model: 'gpt-image-1', prompt: 'a gull', tools: [] },
      'empty-tools',
    );
    expect(answer.status).toBe(200);
    expect((await rig.usageEvent('empty-tools')).payload).toMatchObject({ operation: 'unclassified' });
  });

  it('refuses an unrouted body naming its model twice, in spellings a case-folding server reads as one', async () => {
    const before = rig.sim.requests.length;
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk' },
      body: '{"model":"gpt-4o-mini","prompt":"a gull","Model":"o1-pro"}',
    });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'SVC-SYS-9002' } });
    expect(text).toContain('appears twice');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('relays a free route (token counting) without metering it', async () => {
    const unclassified = () =>
      metricValue(rig.proxy.registry, 'svc_proxy_unclassified_requests_total', { provider: 'anthropic' });
    const before = await unclassified();
    const answer = await post(
      rig,
      '/anthropic/v1/messages/count_tokens',
      { model: 'claude-3-5-haiku-20241022', messages },
      'count-tokens',
    );
    expect(rig.sim.requests.at(-1)?.path).toBe('/v1/messages/count_tokens');
    expect(answer.status).toBe(404);
    expect(eventFor(rig, 'count-tokens')).toBeUndefined();
    expect(await unclassified()).toBe(before);
  });

  it('prices a model missing from the table at the highest known rate of its provider, and counts it before the call', async () => {
    const client = openAiClient(rig.agent, { 'x-request-id': 'unknown-model', 'X-Svc-Execution-Id': 'exec-unknown' });
    await client.chat.completions.create({ model: 'gpt-unreleased', max_tokens: 7, messages });
    const sent = rig.sim.requests.at(-1)?.usageSent;
    if (sent === undefined) throw new Error('the simulator sent no usage');
    const event = await rig.usageEvent('unknown-model');
    expect(event.cost_usd).toBe(cost(rig.prices, 'gpt-unreleased', sent, 'openai').costUsd);
    expect(event.cost_usd).toBeGreaterThanOrEqual(cost(rig.prices, 'o1-pro', sent).costUsd);
    expect(event.payload).toMatchObject({ priced: false, price_basis: 'max_known' });
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_unknown_model_calls_total', { provider: 'openai' }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('keeps made-up model names the provider refuses from taking the metric labels of real models', async () => {
    // The provider refuses each made-up name (404), as it does a model it does not have.
    const refusing = openAiClient(rig.agent, { 'x-sim-error-code': 'SVC-SYS-9006' });
    for (let i = 0; i < 60; i += 1) {
      const refused = await refusing.chat.completions
        .create({ model: `made-up-model-${i}`, max_tokens: 4, messages })
        .catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 404 });
    }
    // Listed in the price table, and a snapshot name only the provider's answer vouches for.
    const real = ['gpt-4o', 'gpt-4o-mini-2024-07-18'];
    for (const model of real) await openAiClient(rig.agent).chat.completions.create({ model, max_tokens: 4, messages });
    const metric = (await rig.proxy.registry.getMetricsAsJSON()).find((m) => m.name === 'svc_proxy_requests_total');
    const labels = (metric?.values ?? []).map((v) => String(v.labels.model));
    expect(labels).toEqual(expect.arrayContaining([...real, 'other']));
    expect(labels.filter((model) => model.startsWith('made-up'))).toEqual([]);
  });
});

describe('with unknown_model_price=deny and proxy_unclassified_paths=refuse', () => {
  let rig: ProxyRig;
  beforeAll(async () => {
    rig = await startProxyRig({ unknown_model_price: 'deny', proxy_unclassified_paths: 'refuse' });
  });
  afterAll(async () => rig.close());

  it('refuses a model missing from the table before sending it, naming the model, in the provider format', async () => {
    const before = rig.sim.requests.length;
    const openai = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-deny' });
    const error = await openai.chat.completions.create({ model: 'gpt-unreleased', max_tokens: 7, messages }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(422);
    expect((error as APIError).code).toBe('SVC-ADP-5004');
    expect((error as APIError).message).toContain('gpt-unreleased');

    const anthropic = anthropicClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-deny' });
    const refused = await anthropic.messages.create({ model: 'claude-unreleased', max_tokens: 7, messages }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(AnthropicApiError);
    expect((refused as AnthropicApiError).status).toBe(422);
    expect((refused as AnthropicApiError).message).toContain('SVC-ADP-5004');
    expect((refused as AnthropicApiError).message).toContain('claude-unreleased');

    // Refused before the call: nothing reached the provider, and no SDK retried.
    expect(rig.sim.requests.length).toBe(before);
    for (const provider of ['openai', 'anthropic'])
      expect(
        await metricValue(rig.proxy.registry, 'svc_proxy_requests_total', { provider, decision: 'unpriced' }),
      ).toBe(1);
    expect(await metricValue(rig.proxy.registry, 'svc_proxy_unknown_model_calls_total', { provider: 'openai' })).toBe(
      1,
    );

    await openai.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 3, messages });
    expect(rig.sim.requests.length).toBe(before + 1);
  });

  it('refuses a request outside every route, and still relays a plain read', async () => {
    const before = rig.sim.requests.length;
    const refused = await post(
      rig,
      '/openai/v1/images/generations',
      { prompt: 'a lighthouse at dusk' },
      'image-refused',
    );
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.text)).toMatchObject({ error: { code: 'SVC-ADP-5003' } });
    expect(refused.text).toContain('proxy_unclassified_paths');
    expect(rig.sim.requests.length).toBe(before);

    const read = await fetch(`${rig.addresses.proxyUrl}/openai/v1/models`, { headers: { authorization: 'Bearer sk' } });
    await read.arrayBuffer();
    await eventually(
      () => rig.sim.requests.length,
      (n) => n === before + 1,
    );
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_unclassified_requests_total', {
        provider: 'openai',
        outcome: 'refused',
      }),
    ).toBe(1);
  });
});

describe('with a provider that cannot be reached', () => {
  let rig: ProxyRig;
  beforeAll(async () => {
    // Nothing listens on port 9 (discard): every connection to Anthropic is refused.
    rig = await startProxyRig({ upstream_overrides: 'api.anthropic.com=http://127.0.0.1:9' });
  });
  afterAll(async () => rig.close());

  it.each([
    ['a free route', 'POST', '/anthropic/v1/messages/count_tokens'],
    ['a plain read', 'GET', '/anthropic/v1/models'],
  ])('answers the failure of %s in the provider format', async (_what, method, path) => {
    const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(method === 'POST' ? { body: JSON.stringify({ model: 'claude-sonnet-4', messages }) } : {}),
    });
    expect(res.status).toBe(502);
    expect(res.headers.get('x-svc-error-code')).toBe('SVC-ADP-5001');
    const body = (await res.json()) as { type: string; error: { type: string; message: string; code: string } };
    expect(body.type).toBe('error');
    expect(body.error.code).toBe('SVC-ADP-5001');
    expect(body.error.message).toMatch(/^SVC-ADP-5001: /);
  });
});
