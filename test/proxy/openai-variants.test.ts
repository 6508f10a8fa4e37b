import { AzureOpenAI } from 'openai';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

type AzureOptions = NonNullable<ConstructorParameters<typeof AzureOpenAI>[0]>;
let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => {
  await rig.close();
});

describe('other OpenAI surfaces through the proxy', () => {
  it('meters a streamed Responses API answer from its completed event', async () => {
    const stream = await openAiClient(rig.agent, { 'x-request-id': 'resp-1' }).responses.create({
      model: 'gpt-4o-mini',
      input: 'List colours',
      max_output_tokens: 9,
      stream: true,
    });
    let completed = false;
    for await (const event of stream) if (event.type === 'response.completed') completed = true;
    expect(completed).toBe(true);
    const sent = rig.sim.requests.at(-1)?.usageSent;
    const event = await rig.usageEvent('resp-1');
    expect(event.tokens).toEqual({ input: sent?.input, output: 9 });
    expect(event.cost_usd).toBeCloseTo(rig.priced('gpt-4o-mini', sent), 12);
    expect(event.payload).toMatchObject({ operation: 'responses', stream: true, usage_source: 'provider' });
  });

  it('meters Azure OpenAI by its deployment through CONNECT interception', async () => {
    const client = new AzureOpenAI({
      endpoint: 'https://myres.openai.azure.com',
      apiKey: 'azure-key',
      apiVersion: '2024-10-21',
      deployment: 'gpt-4o-mini',
      fetch: fetch as unknown as AzureOptions['fetch'],
      fetchOptions: { dispatcher: rig.agent } as unknown as AzureOptions['fetchOptions'],
      defaultHeaders: { 'x-request-id': 'azure-1' },
    });
    const answer = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(answer.usage?.completion_tokens).toBe(4);
    const seen = rig.sim.requests.at(-1);
    expect(seen?.path).toMatch(/^\/openai\/deployments\/gpt-4o-mini\/chat\/completions\?api-version=/);
    expect(seen?.headers['api-key']).toBe('azure-key');
    const event = await rig.usageEvent('azure-1');
    expect(event.payload).toMatchObject({ provider: 'azure-openai' });
    expect(event.cost_usd).toBeCloseTo(rig.priced('gpt-4o-mini', seen?.usageSent), 12);
  });

  it('sends a stream request on as the client wrote it, the usage it asks for appended', async () => {
    // Escapes and spacing a body written again would lose.
    const written =
      '{ "model": "gpt-4o-mini", "max_tokens": 3, "stream": true,\n  "messages": [{"role": "user", "content": "caf\\u00e9"}] }\n';
    const res = await fetch('https://api.openai.com/v1/chat/completions', {
      method: 'POST',
      dispatcher: rig.agent,
      headers: { 'content-type': 'application/json', 'x-request-id': 'as-written-1' },
      body: written,
    });
    expect(res.status).toBe(200);
    await res.text();
    expect(rig.sim.requests.at(-1)?.body).toBe(
      '{ "model": "gpt-4o-mini", "max_tokens": 3, "stream": true,\n  "messages": [{"role": "user", "content": "caf\\u00e9"}],"stream_options":{"include_usage":true}}\n',
    );
    const event = await rig.usageEvent('as-written-1');
    expect(event.payload).toMatchObject({ stream: true, usage_source: 'provider' });
  });
});
