import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { azureClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
  await rig.addPolicy({ name: 'no-o1', priority: 400, rules: [{ action: 'llm:o1*', effect: 'deny' }] });
  await rig.addPolicy({
    name: 'no-gemini-pro',
    priority: 400,
    rules: [{ action: 'llm:gemini-2.5-pro*', effect: 'deny' }],
  });
});
afterAll(async () => {
  await rig.close();
});

/** Requests the simulator received so far: a refused call never reaches it. */
const upstreamCalls = () => rig.sim.requests.length;

async function post(path: string, body: unknown, requestId: string) {
  const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-goog-api-key': 'k',
      'x-request-id': requestId,
      'x-svc-execution-id': `exec-${requestId}`,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

const messages = [{ role: 'user' as const, content: 'hello' }];
const contents = [{ role: 'user', parts: [{ text: 'hello' }] }];

describe('Azure OpenAI serves the deployment its URL names, whatever model the body claims', () => {
  it('judges the call as the deployment', async () => {
    const before = upstreamCalls();
    const azure = azureClient(rig.agent, 'o1-pro', { 'x-svc-execution-id': 'exec-azure-denied' });
    const error = await azure.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 3 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).message).toContain('SVC-POL-2001');
    expect(upstreamCalls()).toBe(before);
  });

  it('meters and prices a stream as the deployment', async () => {
    const azure = azureClient(rig.agent, 'gpt-4o', {
      'x-request-id': 'azure-stream',
      'x-svc-execution-id': 'exec-azure-stream',
    });
    const stream = await azure.chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      max_tokens: 5,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    const event = await rig.usageEvent('azure-stream');
    expect(event.tokens.output).toBeGreaterThan(0);
    expect(event.cost_usd).toBe(rig.priced('gpt-4o', { ...event.tokens, cachedInput: 0 }));
    expect(event.cost_usd).toBeGreaterThan(rig.priced('gpt-4o-mini', { ...event.tokens, cachedInput: 0 }));
  });
});

describe('Gemini serves the model its URL names', () => {
  it('governs the preview API version as the others: judged, then metered from the answer', async () => {
    const before = upstreamCalls();
    const denied = await post(
      '/gemini/v1alpha/models/gemini-2.5-pro:generateContent',
      { model: 'gemini-1.5-flash-8b', contents },
      'v1alpha-denied',
    );
    expect(denied.status).toBe(403);
    expect(denied.text).toContain('SVC-POL-2001');
    expect(upstreamCalls()).toBe(before);

    const allowed = await post(
      '/gemini/v1alpha/models/gemini-2.0-flash:generateContent',
      { contents, generationConfig: { maxOutputTokens: 4 } },
      'v1alpha-allowed',
    );
    expect(allowed.status).toBe(200);
    const event = await rig.usageEvent('v1alpha-allowed');
    expect(event.payload).toMatchObject({ operation: 'generate', charged: 'usage' });
    expect(event.cost_usd).toBe(rig.priced('gemini-2.0-flash', { ...event.tokens, cachedInput: 0 }));
  });

  it('judges a percent-encoded model in the route as the model it spells', async () => {
    const before = upstreamCalls();
    const denied = await post('/gemini/v1beta/models/gemini%2D2.5-pro:generateContent', { contents }, 'encoded-model');
    expect(denied.status).toBe(403);
    expect(denied.text).toContain('SVC-POL-2001');
    expect(upstreamCalls()).toBe(before);
  });

  it('judges an unclassified spelling of a route as the model its path names, not its body', async () => {
    const before = upstreamCalls();
    for (const path of [
      '/gemini/v1beta/models/gemini-2.5-pro:GenerateContent',
      '/gemini/V1BETA/Models/gemini-2.5-pro%3AgenerateContent',
    ]) {
      const denied = await post(path, { model: 'gemini-1.5-flash-8b', contents }, `spelled-${path.length}`);
      expect(denied.status, path).toBe(403);
      expect(denied.text).toContain('SVC-POL-2001');
    }
    expect(upstreamCalls()).toBe(before);
  });
});
