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
});
