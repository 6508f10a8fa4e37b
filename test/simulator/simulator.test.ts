import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from './index.ts';

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const chat = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream: true };

/** A throw-away self-signed certificate for 127.0.0.1, made with the system's openssl. */
function selfSigned(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sim-tls-'));
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyPath,
      '-out',
      certPath,
    ],
    { stdio: 'ignore' },
  );
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };
}

describe('provider simulator', () => {
  it('records each request with headers and body', async () => {
    sim = await startSimulator();
    await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ ...chat, stream: false }),
      headers: { 'x-agent': 'a1' },
    });
    expect(sim.requests).toHaveLength(1);
    expect(sim.requests[0]).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions',
      provider: 'openai',
      operation: 'chat',
      status: 200,
      json: { model: 'gpt-4o' },
    });
    expect(sim.requests[0]?.headers['x-agent']).toBe('a1');
    expect(sim.requests[0]?.usageSent).toEqual({
      input: Math.ceil(Buffer.byteLength(sim.requests[0]?.body ?? '') / 4),
      output: 5,
      cachedInput: 0,
    });
  });

  it('derives the answer from the request and headers, deterministically', async () => {
    sim = await startSimulator();
    const ask = async () =>
      (
        await fetch(`${sim!.url}/v1/chat/completions`, {
          method: 'POST',
          body: JSON.stringify({ ...chat, stream: false }),
          headers: { 'x-sim-output-tokens': '3', 'x-sim-input-tokens': '40' },
        })
      ).json();
    const [a, b] = await Promise.all([ask(), ask()]);
    expect(a).toEqual(b);
    expect(a).toMatchObject({
      choices: [{ message: { content: ' one two three' } }],
      usage: { prompt_tokens: 40, completion_tokens: 3 },
    });
  });

  it('paces stream events so a reader sees them one by one', async () => {
    sim = await startSimulator({ chunkDelayMs: 60 });
    const started = Date.now();
    const res = await fetch(`${sim.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat) });
    const reader = res.body!.getReader();
    const arrivals: number[] = [];
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      arrivals.push(Date.now() - started);
    }
    // 5 words + role + finish + [DONE]: 8 events, 7 pauses.
    expect(arrivals.length).toBeGreaterThanOrEqual(6);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(6 * 60 - 20);
  });

  it('answers 404 in OpenAI format for unknown routes and records them', async () => {
    sim = await startSimulator();
    const res = await fetch(`${sim.url}/v1/models`);
    expect(res.status).toBe(404);
    expect(sim.requests[0]).toMatchObject({ provider: null, operation: null, status: 404 });
  });

  it('serves HTTPS with a given certificate', async () => {
    const tls = selfSigned();
    sim = await startSimulator({ tls });
    expect(sim.url.startsWith('https://')).toBe(true);
    const dispatcher = new Agent({ connect: { ca: tls.cert } });
    const res = await undiciFetch(`${sim.url}/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({ model: 'claude-sonnet-4', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
      dispatcher,
    });
    expect(await res.json()).toMatchObject({ type: 'message', content: [{ type: 'text', text: ' one two' }] });
    await dispatcher.close();
  });
});

describe('provider simulator routes', () => {
  it('serves the OpenAI format under any prefix, as OpenAI-compatible servers do', async () => {
    sim = await startSimulator();
    const res = await fetch(`${sim.url}/compat/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ ...chat, stream: false, model: 'llama3.1:8b' }),
    });
    expect(await res.json()).toMatchObject({ model: 'llama3.1:8b', usage: { completion_tokens: 5 } });
  });

  it('answers 500 naming the header for an unknown injected error code', async () => {
    sim = await startSimulator();
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(chat),
      headers: { 'x-sim-error-code': 'SVC-NOPE-1' },
    });
    expect(res.status).toBe(500);
    expect(await res.text()).toContain('x-sim-error-code');
  });
});
