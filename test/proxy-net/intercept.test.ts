import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch, ProxyAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAT_COMPLETION, metricValue, startRig, type Rig } from './harness.ts';

const run = promisify(execFile);
type ClientOptions = NonNullable<ConstructorParameters<typeof OpenAI>[0]>;
type ClientFetch = ClientOptions['fetch'];
type ClientFetchOptions = ClientOptions['fetchOptions'];
let rig: Rig;
let dispatcher: ProxyAgent;

beforeAll(async () => {
  rig = await startRig();
  // What HTTPS_PROXY means to an undici-based client: CONNECT through the proxy, trusting its CA.
  dispatcher = new ProxyAgent({ uri: rig.proxyUrl, requestTls: { ca: rig.proxyCaPem } });
});
afterAll(async () => {
  await dispatcher.close();
  await rig.close();
});

describe('CONNECT interception of api.openai.com', () => {
  it('carries an official OpenAI SDK call through TLS interception, the answer arriving unchanged', async () => {
    const client = new OpenAI({
      apiKey: 'sk-test-key',
      maxRetries: 0,
      fetch: fetch as unknown as ClientFetch,
      fetchOptions: { dispatcher } as unknown as ClientFetchOptions,
      defaultHeaders: { 'X-SVC-Envelope-Id': 'env-123', 'x-svc-tenant-id': 'tenant-a', 'x-request-id': 'req-sdk-1' },
    });
    const completion = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(completion).toEqual(CHAT_COMPLETION);

    const seen = rig.provider.seen.find((r) => r.headers['x-request-id'] === 'req-sdk-1');
    expect(seen?.url).toBe('/v1/chat/completions');
    expect(seen?.headers.authorization).toBe('Bearer sk-test-key');
    expect(JSON.parse(seen?.body ?? '{}')).toMatchObject({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
    });
    // (c) no governance header reaches the upstream, whatever its case.
    expect(Object.keys(seen?.headers ?? {}).filter((h) => h.toLowerCase().startsWith('x-svc-'))).toEqual([]);
    expect(
      await metricValue(rig.registry, 'svc_proxy_connections_total', { mode: 'intercept' }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('mints one leaf for the host however many tunnels open to it', async () => {
    const before = rig.leafCertificates.stats.minted;
    const agents = [1, 2, 3].map(() => new ProxyAgent({ uri: rig.proxyUrl, requestTls: { ca: rig.proxyCaPem } }));
    try {
      const answers = await Promise.all(
        agents.map((agent) =>
          fetch('https://api.openai.com/v1/chat/completions', { method: 'POST', body: '{}', dispatcher: agent }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      expect(rig.leafCertificates.stats.minted).toBe(Math.max(before, 1));
    } finally {
      await Promise.all(agents.map((a) => a.close()));
    }
  });

  it('serves plain fetch in a child process configured only by HTTPS_PROXY, NODE_USE_ENV_PROXY and NODE_EXTRA_CA_CERTS', async () => {
    const script = `
      const res = await fetch('https://api.openai.com/v1/chat/completions', {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-child', 'x-svc-budget-id': 'b-1', 'x-request-id': 'req-child' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
      });
      process.stdout.write(JSON.stringify({ status: res.status, body: await res.json() }));`;
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HTTPS_PROXY: rig.proxyUrl,
      NODE_USE_ENV_PROXY: '1',
      NODE_EXTRA_CA_CERTS: rig.proxyCaFile,
    };
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { env, timeout: 20_000 });
    expect(JSON.parse(stdout)).toEqual({ status: 200, body: CHAT_COMPLETION });
    const seen = rig.provider.seen.find((r) => r.headers['x-request-id'] === 'req-child');
    expect(seen?.headers.authorization).toBe('Bearer sk-child');
    expect(seen?.headers['x-svc-budget-id']).toBeUndefined();
  });

  it('keeps an intercepted request on the CONNECT host even when its path starts with //', async () => {
    const res = await fetch('https://api.openai.com//evil.test/models?x=1', {
      dispatcher,
      headers: { 'x-request-id': 'req-slashes' },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ path: '//evil.test/models?x=1', method: 'GET' });
  });

  it('relays a streamed answer chunk by chunk: the first chunk arrives before the upstream sends the last', async () => {
    rig.provider.holdStream();
    const res = await fetch('https://api.openai.com/stream', { dispatcher });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('"first"');
    expect(rig.provider.lastChunkSent).toBe(false);
    rig.provider.releaseStream();
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += new TextDecoder().decode(chunk.value);
    expect(rest).toContain('"last"');
    expect(rest).toContain('[DONE]');
    expect(rig.provider.lastChunkSent).toBe(true);
  });
});
