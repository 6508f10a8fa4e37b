import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

const BODY_LIMIT = 16 * 1024;
const EVENT_LIMIT = 100;

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig({
    proxy_body_limit_bytes: BODY_LIMIT,
    proxy_stream_event_limit_bytes: EVENT_LIMIT,
  });
});
afterAll(async () => {
  await rig.close();
});

async function caught(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('bounded input on the LLM path', () => {
  it('refuses a request body over the limit with 413 SVC-SYS-9009 in the OpenAI format, sending nothing upstream', async () => {
    const before = rig.sim.requests.length;
    const error = await caught(() =>
      openAiClient(rig.agent).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'x'.repeat(2 * BODY_LIMIT) }],
      }),
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe('SVC-SYS-9009');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('refuses a request body over the limit with 413 in the Anthropic format', async () => {
    const error = await caught(() =>
      anthropicClient(rig.agent).messages.create({
        model: 'claude-3-5-haiku-20241022',
        max_tokens: 8,
        messages: [{ role: 'user', content: 'x'.repeat(2 * BODY_LIMIT) }],
      }),
    );
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(413);
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      error: { type: 'request_too_large', code: 'SVC-SYS-9009' },
    });
  });

  it('refuses a model name longer than any provider serves, before it becomes a metric label or an action', async () => {
    const before = rig.sim.requests.length;
    const model = 'm'.repeat(201);
    const error = await caught(() =>
      openAiClient(rig.agent).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe('SVC-SYS-9002');
    expect((error as Error).message).toContain('model: at most 200 characters');
    const unrouted = await fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: 'a gull' }),
    });
    expect(unrouted.status).toBe(400);
    expect(await unrouted.text()).toContain('model: at most 200 characters');
    expect(rig.sim.requests.length).toBe(before);
    expect(await rig.proxy.registry.metrics()).not.toContain(model);
  });

  it('ends a stream whose event is over the event limit with an error event the SDK raises', async () => {
    const stream = await openAiClient(rig.agent).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 20,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const error = await caught(async () => {
      for await (const chunk of stream) expect(chunk).toBeDefined();
    });
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain('SVC-SYS-9009');
  });
});

/** A chat call sent as raw bytes through the reverse route, with the headers given. */
async function rawChat(bytes: Uint8Array, headers: Record<string, string>) {
  const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: bytes,
  });
  return { status: res.status, json: (await res.json()) as { error?: { code: string; message: string } } };
}

const chatText = (content: string) =>
  JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 2, messages: [{ role: 'user', content }] });

describe('LLM request bodies are governed as the provider reads them', () => {
  it('undoes a content coding and sends the provider the decoded JSON, without the coding', async () => {
    const answer = await rawChat(gzipSync(chatText('hi')), { 'content-encoding': 'gzip' });
    expect(answer.status).toBe(200);
    const seen = rig.sim.requests.at(-1);
    expect(seen?.headers['content-encoding']).toBeUndefined();
    expect(seen?.json).toEqual(JSON.parse(chatText('hi')));
  });

  it('refuses JSON labelled with a coding it is not in, sending nothing upstream', async () => {
    const before = rig.sim.requests.length;
    const answer = await rawChat(Buffer.from(chatText('hi')), { 'content-encoding': 'gzip' });
    expect(answer.status).toBe(400);
    expect(answer.json.error?.code).toBe('SVC-SYS-9002');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('reads the text in its declared charset and sends it as UTF-8', async () => {
    const answer = await rawChat(Buffer.from(chatText('caf\u00e9'), 'latin1'), {
      'content-type': 'application/json; charset=iso-8859-1',
    });
    expect(answer.status).toBe(200);
    const seen = rig.sim.requests.at(-1);
    expect(seen?.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(seen?.json).toEqual(JSON.parse(chatText('caf\u00e9')));
  });

  it('reads UTF-16 by its byte order mark', async () => {
    const answer = await rawChat(Buffer.from(`\ufeff${chatText('hi')}`, 'utf16le'), {});
    expect(answer.status).toBe(200);
    expect(rig.sim.requests.at(-1)?.json).toEqual(JSON.parse(chatText('hi')));
  });

  it('refuses a key given twice (which one a provider reads is its own choice), sending nothing upstream', async () => {
    const before = rig.sim.requests.length;
    // Exactly, and up to case: Go's encoding/json (Ollama, other OpenAI-compatible servers)
    // reads "Model" or "max_to\u212Aens" (a Kelvin sign) as the field, and keeps the last.
    for (const key of ['"model"', '"Model"', '"MODEL"']) {
      const twice = chatText('hi').replace('{', `{${key}:"gpt-4o",`);
      const answer = await rawChat(Buffer.from(twice), {});
      expect(answer.status).toBe(400);
      expect(answer.json.error?.code).toBe('SVC-SYS-9002');
      expect(answer.json.error?.message).toContain('"model"');
    }
    const bound = chatText('hi').replace('{', '{"max_tokens":10,"max_to\\u212Aens":100000,');
    expect((await rawChat(Buffer.from(bound), {})).json.error?.message).toContain('"max_tokens" appears twice');
    expect(rig.sim.requests.length).toBe(before);
  });
});

describe('deep input under the default body limit', () => {
  let roomy: ProxyRig;
  beforeAll(async () => {
    roomy = await startProxyRig();
  });
  afterAll(async () => roomy.close());

  it('refuses a body nested deeper than any provider accepts with 400, not a proxy failure', async () => {
    // Deep enough to exhaust the stack of a recursive reader of message contents.
    const depth = 5000;
    const content = `${'[{"type":"text","content":'.repeat(depth)}"x"${'}]'.repeat(depth)}`;
    const body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":${content}}]}`;
    const before = roomy.sim.requests.length;
    const res = await fetch(`${roomy.addresses.proxyUrl}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(400);
    const error = ((await res.json()) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('SVC-SYS-9002');
    expect(error.message).toContain('nested deeper than 128');
    expect(roomy.sim.requests.length).toBe(before);
  });
});

/**
 * A chat call over the limit whose body never ends, sent chunk by chunk on a raw connection: the
 * answer the client got and when the proxy closed the connection (null if it did not in 30 s).
 */
function endlessChat(chunkBytes: number, everyMs: number): Promise<{ answer: string; closedAfterMs: number | null }> {
  const url = new URL(rig.addresses.proxyUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    const started = Date.now();
    let answer = '';
    const done = (closedAfterMs: number | null) => {
      clearInterval(sending);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ answer, closedAfterMs });
    };
    const chunk = (bytes: number) => `${bytes.toString(16)}\r\n${'x'.repeat(bytes)}\r\n`;
    socket.write(
      'POST /openai/v1/chat/completions HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\n' +
        `transfer-encoding: chunked\r\n\r\n${chunk(2 * BODY_LIMIT)}`,
    );
    const sending = setInterval(() => {
      if (socket.writable) socket.write(chunk(chunkBytes));
    }, everyMs);
    const giveUp = setTimeout(() => done(null), 30_000);
    socket.setEncoding('latin1').on('data', (text: string) => (answer += text));
    socket.on('error', () => undefined).on('close', () => done(Date.now() - started));
  });
}

describe('a refused request body that never ends', () => {
  it('is answered 413 and its connection closed once more than four times the limit arrived', async () => {
    const sent = await endlessChat(BODY_LIMIT, 5);
    expect(sent.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(sent.answer).toContain('SVC-SYS-9009');
    expect(sent.closedAfterMs).not.toBeNull();
  });

  it('is answered 413 and its connection closed after the drain time when it only trickles', async () => {
    const sent = await endlessChat(10, 100);
    expect(sent.answer).toMatch(/^HTTP\/1\.1 413 /);
    // Four times the limit would take minutes at this pace: the time bound (5 s) closed it.
    expect(sent.closedAfterMs).not.toBeNull();
    expect(sent.closedAfterMs!).toBeGreaterThanOrEqual(4_000);
  }, 40_000);
});
