import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import { eventually } from '../harness/eventually.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';

/**
 * The durability contract (docs/performance.md): an answer completes only once its call is
 * recorded, so a process killed at any moment never leaves an answer delivered in full and
 * unrecorded. Here the record's write is held open, and the agent must not have the whole
 * answer until it is let go, on every path that charges a call.
 */
describe('an answer completes only after its call is recorded', () => {
  let rig: ProxyRig;
  let tools: ToolServer;
  let gate = Promise.withResolvers<void>();
  let held = 0;
  beforeAll(async () => {
    tools = await startToolServer(true);
    rig = await startProxyRig({ proxy_mcp_servers: `tools=${tools.url}` });
    const outbox = rig.proxy.outbox;
    const append = outbox.append.bind(outbox);
    outbox.append = async (event: OutboxEvent) => {
      if (event.subject.endsWith('.events.llm.call') || event.subject.endsWith('.events.tool.call')) {
        held++;
        await gate.promise;
      }
      return append(event);
    };
  });
  afterAll(async () => {
    gate.resolve();
    await rig.close();
    await tools.close();
  });

  /** Makes the call while its record is held; it must not complete until the record is let go. */
  async function heldUntilRecorded<T>(call: () => Promise<T>): Promise<T> {
    gate = Promise.withResolvers<void>();
    const before = held;
    const answer = call();
    try {
      // The first estimate loads the tokenizer, slow on a loaded machine.
      await eventually(
        () => held,
        (n) => n === before + 1,
        15_000,
      );
      const first = await Promise.race([answer.then(() => 'answered'), sleep(300).then(() => 'waiting')]);
      expect(first).toBe('waiting');
    } finally {
      // Let go whatever happened, so that a failure here does not hold the calls after it.
      gate.resolve();
    }
    return answer;
  }

  async function post(path: string, body: unknown, headers: Record<string, string> = {}, status = 200) {
    const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk', ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    expect(res.status).toBe(status);
    return text;
  }

  const chat = (stream: boolean) => ({
    model: 'gpt-4o-mini',
    max_tokens: 8,
    stream,
    messages: [{ role: 'user', content: 'hello' }],
  });

  it('a whole answer', async () => {
    const text = await heldUntilRecorded(() => post('/openai/v1/chat/completions', chat(false)));
    expect(JSON.parse(text)).toHaveProperty('usage');
  });

  it('an answer that failed mid-way: its refusal waits for the worst-case charge', async () => {
    const text = await heldUntilRecorded(() =>
      post('/openai/v1/chat/completions', chat(false), { 'x-sim-reset-after-bytes': '10' }, 502),
    );
    expect(text).toContain('SVC-ADP-5001');
  });

  it('a streamed answer: its last events wait', async () => {
    const text = await heldUntilRecorded(() => post('/openai/v1/chat/completions', chat(true)));
    expect(text).toContain('data: [DONE]');
  });

  for (const [form, headers] of [
    ['of a known length', {}],
    ['chunked', { 'x-sim-chunked': '1' }],
  ] as const) {
    it(`an unclassified call, charged at its estimate: an answer ${form}`, async () => {
      const text = await heldUntilRecorded(() =>
        post('/openai/v1/images/generations', { prompt: 'a lighthouse at dusk' }, headers),
      );
      expect(JSON.parse(text)).toMatchObject({ data: [{ b64_json: 'iVBORw0KGgo=' }] });
    });
  }

  it('an MCP tool call', async () => {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${rig.addresses.proxyUrl}/mcp/tools/mcp`)));
    const result = await heldUntilRecorded(() => client.callTool({ name: 'search', arguments: {} }));
    expect(result.content).toEqual([{ type: 'text', text: 'search done' }]);
    expect(tools.calls).toEqual(['search']);
    await client.close();
  });
});
