import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { cost } from '../../core/metering/prices.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';

/**
 * Answers as providers and the network sometimes send them: compressed although the proxy asked
 * for identity, behind a byte order mark, with a key given twice, not JSON at all, or whole to a
 * request that asked for a stream. The proxy reads each as the agent's client would, judges its
 * tool calls, and withholds (charging the worst case) what it cannot read.
 */
const USAGE = { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 };

function completion(tool: string | null): Record<string, unknown> {
  const message =
    tool === null
      ? { role: 'assistant', content: ' one two three' }
      : {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: tool, arguments: '{}' } }],
        };
  return {
    id: 'chatcmpl-x',
    object: 'chat.completion',
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message, finish_reason: tool === null ? 'stop' : 'tool_calls' }],
    usage: USAGE,
  };
}

const sse = (events: unknown[]) => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
const chunk = (delta: unknown, usage: unknown = null) => ({
  id: 'chatcmpl-x',
  object: 'chat.completion.chunk',
  model: 'gpt-4o-mini',
  choices: usage === null ? [{ index: 0, delta, finish_reason: null }] : [],
  usage,
});

/** What the scripted provider answers, by the `x-answer` header of the request. */
const ANSWERS: Record<string, { type: string; encoding?: string; body: Buffer }> = {
  'gzip-tool': { type: 'application/json', encoding: 'gzip', body: gzipSync(JSON.stringify(completion('shell'))) },
  'gzip-text': { type: 'application/json', encoding: 'gzip', body: gzipSync(JSON.stringify(completion(null))) },
  'bom-tool': {
    type: 'application/json',
    body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(completion('shell')))]),
  },
  'twice-tool': {
    type: 'application/json',
    body: Buffer.from(
      JSON.stringify(completion('shell')).replace(
        '"choices":',
        `"choices":${JSON.stringify((completion('search') as { choices: unknown }).choices)},"choices":`,
      ),
    ),
  },
  garbage: { type: 'application/json', body: Buffer.from('<html>gateway says hello</html>') },
  'whole-tool': { type: 'application/json', body: Buffer.from(JSON.stringify(completion('shell'))) },
  'gzip-sse': {
    type: 'text/event-stream',
    encoding: 'gzip',
    body: gzipSync(
      sse([
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: ' one' }),
        chunk({ content: ' two' }),
        chunk({}, USAGE),
      ]),
    ),
  },
};

let rig: ProxyRig;
let provider: Server;

beforeAll(async () => {
  provider = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = ANSWERS[String(req.headers['x-answer'])];
      if (answer === undefined) return void res.writeHead(404).end();
      res.writeHead(200, {
        'content-type': answer.type,
        ...(answer.encoding !== undefined ? { 'content-encoding': answer.encoding } : {}),
      });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  const { port } = provider.address() as AddressInfo;
  rig = await startProxyRig({ upstream_overrides: `api.openai.com=http://127.0.0.1:${port}` });
  await rig.addPolicy({ name: 'no-shell', rules: [{ action: 'tool:shell', effect: 'deny' }], priority: 500 });
});
afterAll(async () => {
  await rig.close();
  provider.closeAllConnections();
  await new Promise<void>((resolve) => provider.close(() => resolve()));
});

const request = { model: 'gpt-4o-mini', max_tokens: 40, messages: [{ role: 'user', content: 'hi' }] };

async function chat(answer: string, stream = false) {
  const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-answer': answer, 'x-request-id': `answer-${answer}` },
    body: JSON.stringify({ ...request, stream }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, event: await rig.usageEvent(`answer-${answer}`) };
}

function expectCode(answer: { status: number; text: string }, status: number, code: string): void {
  expect(answer.status).toBe(status);
  expect((JSON.parse(answer.text) as { error: { code: string } }).error.code).toBe(code);
}

function expectWorstCase(event: UsageEventMessage): void {
  expect(event.payload).toMatchObject({ charged: 'worst_case', cut_off: 'answer_unreadable' });
  expect(event.tokens.output).toBe(request.max_tokens);
}

describe('answers the proxy must decode before it can govern them', () => {
  it('judges the tool calls of a compressed answer: a denied one never reaches the agent', async () => {
    const answer = await chat('gzip-tool');
    expectCode(answer, 403, 'SVC-POL-2001');
    expect(answer.text).not.toContain('"name":"shell"');
  });

  it('meters a compressed answer from its usage and relays it decoded', async () => {
    const answer = await chat('gzip-text');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-encoding')).toBeNull();
    expect(JSON.parse(answer.text)).toEqual(completion(null));
    expect(answer.event.tokens).toEqual({ input: 11, output: 3 });
    expect(answer.event.payload).toMatchObject({ usage_source: 'provider', charged: 'usage' });
  });

  it('reads an answer behind a byte order mark, as fetch does, and judges its tool calls', async () => {
    expectCode(await chat('bom-tool'), 403, 'SVC-POL-2001');
  });

  it('meters a compressed stream from its own usage and relays it decoded', async () => {
    const answer = await chat('gzip-sse', true);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-encoding')).toBeNull();
    expect(answer.text).toContain('" two"');
    expect(answer.event.tokens).toEqual({ input: 11, output: 3 });
    expect(answer.event.cost_usd).toBe(
      cost(rig.prices, 'gpt-4o-mini', { input: 11, output: 3, cachedInput: 0 }).costUsd,
    );
  });
});

describe('answers the proxy cannot read are withheld and charged at the worst case', () => {
  it('an answer that is not JSON', async () => {
    const answer = await chat('garbage');
    expectCode(answer, 502, 'SVC-ADP-5001');
    expect(answer.text).not.toContain('gateway says hello');
    expectWorstCase(answer.event);
  });

  it('an answer with a key given twice: which one the agent reads is its parser’s choice', async () => {
    const answer = await chat('twice-tool');
    expectCode(answer, 502, 'SVC-ADP-5001');
    expect(answer.text).not.toContain('"name":"shell"');
    expectWorstCase(answer.event);
  });
});

describe('a whole answer to a stream request', () => {
  it('is governed as the whole answer it is: a denied tool call is refused, not passed on unread', async () => {
    const answer = await chat('whole-tool', true);
    expectCode(answer, 403, 'SVC-POL-2001');
    expect(answer.text).not.toContain('"name":"shell"');
    expect(answer.event.payload).toMatchObject({ charged: 'usage', usage_source: 'provider' });
  });
});
