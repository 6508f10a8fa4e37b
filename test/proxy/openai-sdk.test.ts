import type OpenAI from 'openai';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch, type ProxyAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => {
  await rig.close();
});

function client(headers: Record<string, string> = {}): OpenAI {
  return openAiClient(rig.agent, headers);
}

describe('official OpenAI SDK through CONNECT interception', () => {
  it('gets the answer unchanged and the envelope cost equals the simulator usage priced from the table', async () => {
    const { data: completion, response } = await client({ 'X-Svc-Execution-Id': 'exec-openai-1' })
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'Say hello' }],
        max_tokens: 12,
      })
      .withResponse();
    const seen = rig.sim.requests.at(-1);
    expect(seen?.path).toBe('/v1/chat/completions');
    expect(seen?.headers.authorization).toBe('Bearer sk-test-key');
    expect(Object.keys(seen?.headers ?? {}).filter((h) => h.startsWith('x-svc-'))).toEqual([]);
    expect(completion.usage?.prompt_tokens).toBe(seen?.usageSent?.input);
    expect(completion.usage?.completion_tokens).toBe(12);

    const envelopeId = response.headers.get('x-svc-envelope-id');
    expect(envelopeId).toMatch(/^[0-9a-f-]{36}$/);
    const expected = rig.priced('gpt-4o-mini', seen?.usageSent);
    expect(expected).toBeGreaterThan(0);
    const envelope = await eventually(
      () => rig.envelope(String(envelopeId)),
      (e) => e?.cost_summary.llm_calls === 1,
    );
    expect(envelope?.execution_id).toBe('exec-openai-1');
    expect(envelope?.state).toBe('RUNNING');
    expect(envelope?.cost_summary.tokens_input).toBe(seen?.usageSent?.input);
    expect(envelope?.cost_summary.tokens_output).toBe(12);
    expect(envelope?.cost_summary.cost_usd).toBeCloseTo(expected, 6);
  });

  it('relays the answer byte for byte: the same request straight to the simulator gets the same body', async () => {
    const request = { model: 'gpt-4o-mini', max_tokens: 6, messages: [{ role: 'user', content: 'same' }] };
    const init = (dispatcher?: ProxyAgent) => ({
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk' },
      body: JSON.stringify(request),
      ...(dispatcher ? { dispatcher } : {}),
    });
    const proxied = await fetch('https://api.openai.com/v1/chat/completions', init(rig.agent));
    const direct = await fetch(`${rig.sim.url}/v1/chat/completions`, init());
    expect(proxied.status).toBe(200);
    expect(await proxied.text()).toBe(await direct.text());
  });

  it('reuses the envelope of an execution and keeps the pod execution apart', async () => {
    const first = await client({ 'X-Svc-Execution-Id': 'exec-reuse' })
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'a' }], max_tokens: 3 })
      .withResponse();
    const second = await client({ 'X-Svc-Execution-Id': 'exec-reuse' })
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'b' }], max_tokens: 3 })
      .withResponse();
    const pod = await client()
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'c' }], max_tokens: 3 })
      .withResponse();
    const id = first.response.headers.get('x-svc-envelope-id');
    expect(second.response.headers.get('x-svc-envelope-id')).toBe(id);
    expect(pod.response.headers.get('x-svc-envelope-id')).not.toBe(id);
    const envelope = await eventually(
      () => rig.envelope(String(id)),
      (e) => e?.cost_summary.llm_calls === 2,
    );
    expect(envelope?.cost_summary.tokens_output).toBe(6);
  });
});

describe('the priority tier through the OpenAI SDK', () => {
  /** GPT-5 at priority: 2.50 input and 20 output per million, twice its standard 1.25 and 10. */
  const atPriority = (tokens: { input: number; output: number }) => (tokens.input * 2.5 + tokens.output * 20) / 1e6;

  it('charges an answer served at priority at the priority rates, asked for or the project default, whole or streamed', async () => {
    const messages = [{ role: 'user' as const, content: 'Be quick' }];
    await client({ 'X-Request-Id': 'tier-asked' }).chat.completions.create({
      model: 'gpt-5',
      messages,
      max_completion_tokens: 8,
      service_tier: 'priority',
    });
    // Asked for nothing, served at priority: a project whose default tier is priority.
    await client({ 'X-Request-Id': 'tier-default', 'x-sim-service-tier': 'priority' }).chat.completions.create({
      model: 'gpt-5',
      messages,
      max_completion_tokens: 8,
    });
    const stream = await client({ 'X-Request-Id': 'tier-stream' }).responses.create({
      model: 'gpt-5',
      input: 'Be quick',
      max_output_tokens: 8,
      service_tier: 'priority',
      stream: true,
    });
    for await (const event of stream) void event;
    for (const id of ['tier-asked', 'tier-default', 'tier-stream']) {
      const event = await rig.usageEvent(id);
      expect(event.payload.service_tier, id).toBe('priority');
      expect(event.cost_usd, id).toBeCloseTo(atPriority(event.tokens), 12);
    }

    // Asked for priority, served at the default tier: the answer is what was billed.
    await client({ 'X-Request-Id': 'tier-downgraded', 'x-sim-service-tier': 'default' }).chat.completions.create({
      model: 'gpt-5',
      messages,
      max_completion_tokens: 8,
      service_tier: 'priority',
    });
    const downgraded = await rig.usageEvent('tier-downgraded');
    expect(downgraded.payload.service_tier).toBe('standard');
    expect(downgraded.cost_usd).toBeCloseTo((downgraded.tokens.input * 1.25 + downgraded.tokens.output * 10) / 1e6, 12);
  });
});
