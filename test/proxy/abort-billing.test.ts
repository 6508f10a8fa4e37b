import { APIError as AnthropicApiError, APIUserAbortError as AnthropicAbortError } from '@anthropic-ai/sdk';
import { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { cost, type TokenUsage } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { createAdapterDeps, createAnthropicAdapter, createOpenAiAdapter } from '../../proxy/providers/index.ts';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

/** Three times the rest of the drained stream below (30 chunks, 20 ms apart), so a busy machine still drains it. */
const DRAIN_MS = 2000;
const ANSWER_LIMIT = 16 * 1024;
let rig: ProxyRig;
const tokens = createTokenCounter();

beforeAll(async () => {
  // One $100 budget bound to the sidecar per test that reads its lease.
  rig = await startProxyRig(
    { proxy_abort_drain_ms: DRAIN_MS, proxy_response_limit_bytes: ANSWER_LIMIT },
    { budgetsUsd: Array.from({ length: 13 }, () => 100) },
  );
});
afterAll(async () => {
  await rig.close();
  tokens.free();
});

let budgetsUsed = 0;

/** A fresh budget whose lease is held before the call, so what the call leaves spent can be read off it. */
async function freshLease(): Promise<{ budgetId: string; spent: () => number }> {
  const budgetId = rig.boundBudgets[budgetsUsed++];
  if (budgetId === undefined) throw new Error('every bound budget is used: bind more');
  const lease = await rig.proxy.leases.lease(budgetId);
  const before = lease.available().pico;
  if (before === null) throw new Error('a cost budget grants a bounded lease');
  return { budgetId, spent: () => before - (lease.available().pico ?? 0) };
}

/** The lease ends charged with exactly the event's cost: the hold returned, the charge kept. */
async function expectLeaseCharged(event: UsageEventMessage, spent: () => number): Promise<void> {
  expect(event.payload.cost_pico_usd).toBeGreaterThan(0);
  await eventually(spent, (s) => s === event.payload.cost_pico_usd);
}

function sentFor(requestId: string): TokenUsage | undefined {
  return rig.sim.requests.find((r) => r.headers['x-request-id'] === requestId)?.usageSent;
}

async function reached(requestId: string): Promise<void> {
  await eventually(
    () => rig.sim.requests.some((r) => r.headers['x-request-id'] === requestId),
    (yes) => yes,
  );
}

const adapterDeps = () => createAdapterDeps(tokens, rig.prices);
const messages = [{ role: 'user' as const, content: 'Tell me a long story about the sea.' }];

/** The proxy's own estimate of the prompt: what a worst-case charge takes as input. */
function openAiPromptEstimate(body: Record<string, unknown>): number {
  return createOpenAiAdapter(adapterDeps()).parseRequest('chat', body, '/v1/chat/completions').estimatedInputTokens;
}

describe('a client that goes away is still billed', () => {
  it('OpenAI SDK, whole answer: the proxy waits for the answer and charges its real usage', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'abort-whole-usage';
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-first-byte-delay-ms': '300',
    });
    const abort = new AbortController();
    const pending = client.chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 50, messages },
      { signal: abort.signal, maxRetries: 0 },
    );
    await reached(id);
    abort.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);

    const event = await rig.usageEvent(id);
    const sent = sentFor(id);
    expect(sent?.output).toBe(50);
    expect(event.tokens).toEqual({ input: sent?.input, output: sent?.output });
    expect(event.payload).toMatchObject({
      aborted: true,
      charged: 'usage',
      usage_source: 'provider',
      cut_off: 'client_gone',
    });
    expect(event.cost_usd).toBe(rig.priced('gpt-4o-mini', sent));
    await expectLeaseCharged(event, spent);
  });

  it('OpenAI SDK, whole answer slower than the drain bound: charged at the worst case', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'abort-whole-worst';
    const body = { model: 'gpt-4o-mini', max_tokens: 700, messages };
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-first-byte-delay-ms': String(DRAIN_MS * 3),
    });
    const abort = new AbortController();
    const pending = client.chat.completions.create(body, { signal: abort.signal, maxRetries: 0 });
    await reached(id);
    abort.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);

    const event = await rig.usageEvent(id);
    const worst = { input: openAiPromptEstimate(body), output: 700, cachedInput: 0 };
    expect(event.tokens).toEqual({ input: worst.input, output: worst.output });
    expect(event.payload).toMatchObject({
      aborted: true,
      charged: 'worst_case',
      usage_source: 'estimated',
      cut_off: 'client_gone',
    });
    expect(event.cost_usd).toBe(cost(rig.prices, 'gpt-4o-mini', worst).costUsd);
    await expectLeaseCharged(event, spent);
  });

  it('OpenAI SDK, stream: the proxy drains the rest and charges the provider’s final count', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'abort-stream-usage';
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-chunk-delay-ms': '20',
      'x-sim-output-tokens': '30',
    });
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 2000, stream: true, messages },
      { signal: abort.signal, maxRetries: 0 },
    );
    await stream[Symbol.asyncIterator]().next();
    abort.abort();

    const event = await rig.usageEvent(id);
    const sent = sentFor(id);
    expect(sent?.output).toBe(30);
    expect(event.tokens).toEqual({ input: sent?.input, output: 30 });
    expect(event.payload).toMatchObject({
      aborted: true,
      charged: 'usage',
      usage_source: 'provider',
      cut_off: 'client_gone',
      stream: true,
    });
    await expectLeaseCharged(event, spent);
  });

  it('Anthropic SDK, whole answer: charged at its real usage', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'abort-anthropic-whole';
    const client = anthropicClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-first-byte-delay-ms': '300',
    });
    const abort = new AbortController();
    const pending = client.messages.create(
      { model: 'claude-3-5-haiku-20241022', max_tokens: 40, messages },
      { signal: abort.signal, maxRetries: 0 },
    );
    await reached(id);
    abort.abort();
    await expect(pending).rejects.toBeInstanceOf(AnthropicAbortError);

    const event = await rig.usageEvent(id);
    const sent = sentFor(id);
    expect(event.tokens).toEqual({ input: sent?.input, output: 40 });
    expect(event.payload).toMatchObject({ aborted: true, charged: 'usage', usage_source: 'provider' });
    await expectLeaseCharged(event, spent);
  });

  it('Anthropic SDK, stream longer than the drain bound: charged at the worst case of what remained', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'abort-anthropic-stream';
    const client = anthropicClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-chunk-delay-ms': '150',
      'x-sim-output-tokens': '30',
      'x-sim-input-tokens': '5000',
    });
    const abort = new AbortController();
    const stream = await client.messages.create(
      { model: 'claude-3-5-haiku-20241022', max_tokens: 64, stream: true, messages },
      { signal: abort.signal, maxRetries: 0 },
    );
    await stream[Symbol.asyncIterator]().next();
    abort.abort();

    const event = await rig.usageEvent(id);
    // Input as the provider reported it at the start (more than the proxy counted), the whole answer bound as output.
    const estimated = createAnthropicAdapter(adapterDeps()).parseRequest(
      'messages',
      { model: 'claude-3-5-haiku-20241022', max_tokens: 64, messages },
      '/v1/messages',
    ).estimatedInputTokens;
    expect(estimated).toBeLessThan(5000);
    expect(event.tokens).toEqual({ input: 5000, output: 64 });
    expect(event.payload).toMatchObject({ aborted: true, charged: 'worst_case', cut_off: 'client_gone' });
    expect(event.cost_usd).toBe(
      cost(rig.prices, 'claude-3-5-haiku-20241022', { input: 5000, output: 64, cachedInput: 0 }).costUsd,
    );
    await expectLeaseCharged(event, spent);
  });

  it('a stream whose rest is larger than the answer bound is charged at the worst case, without reading it all', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'abort-stream-too-long';
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-chunk-delay-ms': '2',
      'x-sim-output-tokens': '600',
    });
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 600, stream: true, messages },
      { signal: abort.signal, maxRetries: 0 },
    );
    await stream[Symbol.asyncIterator]().next();
    abort.abort();
    const event = await rig.usageEvent(id);
    expect(event.tokens.output).toBe(600);
    expect(event.payload).toMatchObject({ aborted: true, charged: 'worst_case', cut_off: 'client_gone' });
    await expectLeaseCharged(event, spent);
  });
});

describe('an upstream failure after the request was sent is billed', () => {
  it('a connection reset mid-answer charges the worst case and answers the SDK with SVC-ADP-5001', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'reset-whole';
    const body = { model: 'gpt-4o-mini', max_tokens: 90, messages };
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-reset-after-bytes': '40',
    });
    const error = await client.chat.completions.create(body, { maxRetries: 0 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(502);
    expect((error as APIError).code).toBe('SVC-ADP-5001');

    const event = await rig.usageEvent(id);
    expect(event.tokens).toEqual({ input: openAiPromptEstimate(body), output: 90 });
    expect(event.payload).toMatchObject({ aborted: false, charged: 'worst_case', cut_off: 'upstream_failed' });
    await expectLeaseCharged(event, spent);
  });

  it('a connection reset mid-stream charges the worst case of what remained', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'reset-stream';
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-reset-after-bytes': '700',
      'x-sim-output-tokens': '40',
    });
    const stream = await client.chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 120, stream: true, messages },
      { maxRetries: 0 },
    );
    let received = 0;
    const failure = await (async () => {
      for await (const chunk of stream) received += chunk.choices.length;
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(received).toBeGreaterThan(0);
    expect(failure).toBeInstanceOf(Error);

    const event = await rig.usageEvent(id);
    expect(event.tokens.output).toBe(120);
    expect(event.payload).toMatchObject({ aborted: false, charged: 'worst_case', cut_off: 'upstream_failed' });
    await expectLeaseCharged(event, spent);
  });

  it("a reset answer to a call that refers to context on the provider's side charges that context at its allowance", async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'reset-server-context';
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-reset-after-bytes': '40',
    });
    const request = { model: 'gpt-4o-mini', input: 'and then?', max_output_tokens: 20 };
    const error = await client.responses
      .create({ ...request, previous_response_id: 'resp_earlier' }, { maxRetries: 0 })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((error as APIError).status).toBe(502);
    // The earlier response is billed by the provider as input the proxy could not count.
    const event = await rig.usageEvent(id);
    expect(event.tokens.input).toBeGreaterThan(128_000);
    expect(event.tokens.output).toBe(20);
    expect(event.payload).toMatchObject({ charged: 'worst_case', cut_off: 'upstream_failed' });
    await expectLeaseCharged(event, spent);
  });

  it('a reset answer to a prompt marked for caching charges the whole prompt as written to the cache', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'reset-cache-write';
    const client = anthropicClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-reset-after-bytes': '40',
    });
    const request = {
      model: 'claude-sonnet-4-20250514',
      max_tokens: 20,
      system: [
        {
          type: 'text' as const,
          text: 'A long reference manual.',
          cache_control: { type: 'ephemeral' as const, ttl: '1h' as const },
        },
      ],
      messages,
    };
    const error = await client.messages.create(request, { maxRetries: 0 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as AnthropicApiError).status).toBe(502);
    const event = await rig.usageEvent(id);
    const input = createAnthropicAdapter(adapterDeps()).parseRequest(
      'messages',
      request,
      '/v1/messages',
    ).estimatedInputTokens;
    expect(event.tokens).toEqual({ input, output: 20 });
    // Claude Sonnet 4 writes what it keeps the hour at 6 USD per million, twice its input price.
    expect(event.payload).toMatchObject({ charged: 'worst_case', cache_write_long_input_tokens: input });
    expect(event.payload.cost_pico_usd).toBe(input * 6_000_000 + 20 * 15_000_000);
    await expectLeaseCharged(event, spent);
  });

  it('a provider refusal is relayed and not charged', async () => {
    const { budgetId, spent } = await freshLease();
    const client = anthropicClient(rig.agent, {
      'x-request-id': 'refused-upstream',
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': 'exec-refused-upstream',
      'x-sim-error-code': 'SVC-POL-2001',
    });
    await expect(
      client.messages.create({ model: 'claude-3-5-haiku-20241022', max_tokens: 40, messages }, { maxRetries: 0 }),
    ).rejects.toBeInstanceOf(AnthropicApiError);
    await eventually(spent, (s) => s === 0);
    expect(rig.cp.published.some((m) => (m.data as UsageEventMessage).payload?.request_id === 'refused-upstream')).toBe(
      false,
    );
  });
});

describe('a whole answer larger than the answer bound', () => {
  it('is withheld with SVC-ADP-5005 (not retried), and charged at the worst case', async () => {
    const { budgetId, spent } = await freshLease();
    const id = 'answer-too-large';
    const body = { model: 'gpt-4o-mini', max_tokens: 5000, messages };
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Budget-Id': budgetId,
      'X-Svc-Execution-Id': `exec-${id}`,
    });
    const before = rig.sim.requests.length;
    const error = await client.chat.completions.create(body).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    expect(error).not.toBeInstanceOf(APIConnectionError);
    expect((error as APIError).status).toBe(502);
    expect((error as APIError).code).toBe('SVC-ADP-5005');
    expect((error as APIError).message).toContain(String(ANSWER_LIMIT));
    // Terminal: the SDK asked once.
    expect(rig.sim.requests.length).toBe(before + 1);

    const event = await rig.usageEvent(id);
    expect(event.tokens).toEqual({ input: openAiPromptEstimate(body), output: 5000 });
    expect(event.payload).toMatchObject({ aborted: false, charged: 'worst_case', cut_off: 'answer_too_large' });
    await expectLeaseCharged(event, spent);
  });
});
