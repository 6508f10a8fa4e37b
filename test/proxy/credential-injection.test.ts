import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { AzureOpenAI } from 'openai';
import { pino } from 'pino';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

type AzureOptions = NonNullable<ConstructorParameters<typeof AzureOpenAI>[0]>;
const KEYS = {
  openai: 'sk-proxy-openai-1',
  openaiRotated: 'sk-proxy-openai-2',
  anthropic: 'sk-ant-proxy-key',
  gemini: 'goog-proxy-key',
  azure: 'azure-proxy-key',
};

let rig: ProxyRig;
let dir: string;
let keyFile: string;
const logLines: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'provider-keys-'));
  keyFile = join(dir, 'openai.key');
  await writeFile(keyFile, `${KEYS.openai}\n`, { mode: 0o600 });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  rig = await startProxyRig(
    {
      provider_key_file_openai: keyFile,
      provider_key_anthropic: KEYS.anthropic,
      provider_key_gemini: KEYS.gemini,
      provider_key_azure_openai: KEYS.azure,
      provider_key_reload_seconds: 0,
    },
    { logger: pino({ level: 'trace' }, sink) },
  );
});
afterAll(async () => {
  await rig.close();
  await rm(dir, { recursive: true, force: true });
});

const lastSeen = () => rig.sim.requests.at(-1);

describe('provider credentials injected by the proxy', () => {
  it('replaces the OpenAI key the agent sent (CONNECT interception) with the proxy key', async () => {
    const answer = await openAiClient(rig.agent).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(answer.choices).toHaveLength(1);
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${KEYS.openai}`);
  });

  it('serves an agent holding no key at all', async () => {
    const res = await fetch('https://api.openai.com/v1/chat/completions', {
      method: 'POST',
      dispatcher: rig.agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${KEYS.openai}`);
  });

  it('sets x-api-key for Anthropic and drops the bearer token and key the agent sent', async () => {
    await anthropicClient(rig.agent, { authorization: 'Bearer agent-token' }).messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(lastSeen()?.headers['x-api-key']).toBe(KEYS.anthropic);
    expect(lastSeen()?.headers.authorization).toBeUndefined();
  });

  it('sets api-key for Azure OpenAI', async () => {
    const client = new AzureOpenAI({
      endpoint: 'https://myres.openai.azure.com',
      apiKey: 'azure-agent-key',
      apiVersion: '2024-10-21',
      deployment: 'gpt-4o-mini',
      fetch: fetch as unknown as AzureOptions['fetch'],
      fetchOptions: { dispatcher: rig.agent } as unknown as AzureOptions['fetchOptions'],
    });
    await client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(lastSeen()?.headers['api-key']).toBe(KEYS.azure);
  });

  it('sets x-goog-api-key for Gemini and removes the key= query credential (reverse mode)', async () => {
    const res = await fetch(
      `${rig.addresses.proxyUrl}/gemini/v1beta/models/gemini-2.0-flash:generateContent?key=agent-goog-key`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': 'agent-goog-key' },
        body: JSON.stringify({
          contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
          generationConfig: { maxOutputTokens: 3 },
        }),
      },
    );
    expect(res.status).toBe(200);
    expect(lastSeen()?.path).toBe('/v1beta/models/gemini-2.0-flash:generateContent');
    expect(lastSeen()?.headers['x-goog-api-key']).toBe(KEYS.gemini);
  });

  it('uses a rotated key file after a reload (SIGHUP or the interval)', async () => {
    await writeFile(keyFile, KEYS.openaiRotated);
    await rig.proxy.reloadCredentials();
    await openAiClient(rig.agent).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 2,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${KEYS.openaiRotated}`);
  });

  it('never writes a key into a log line or a metric', async () => {
    const text = logLines.join('') + (await rig.proxy.registry.metrics());
    expect(logLines.length).toBeGreaterThan(0);
    for (const key of Object.values(KEYS)) expect(text).not.toContain(key);
  });
});
