import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

const FOREIGN = 'someone-elses-budget';
const LISTED = 'listed-budget-not-in-control-plane';
let rig: ProxyRig;
let tools: ToolServer;

beforeAll(async () => {
  tools = await startToolServer(true);
  rig = await startProxyRig({ allowed_budget_ids: ` ${LISTED} `, proxy_mcp_servers: `tools=${tools.url}` });
});
afterAll(async () => {
  await rig.close();
  await tools.close();
});

async function rejection(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (error) {
    return error;
  }
  return undefined;
}

const chat = { model: 'gpt-4o-mini', max_tokens: 2, messages: [{ role: 'user' as const, content: 'hi' }] };

describe('X-Svc-Budget-Id is honoured only for the budgets this sidecar is bound to', () => {
  it('refuses a foreign budget with 403 SVC-SYS-9004 in the OpenAI format and sends nothing upstream', async () => {
    const before = rig.sim.requests.length;
    const error = await rejection(() =>
      openAiClient(rig.agent, {
        'X-Svc-Budget-Id': FOREIGN,
        'X-Svc-Execution-Id': 'exec-foreign',
      }).chat.completions.create(chat),
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-SYS-9004');
    expect((error as APIError).message).toContain(FOREIGN);
    expect(rig.sim.requests.length).toBe(before);
  });

  it('refuses it in the Anthropic format too, even on an execution already open on an allowed budget', async () => {
    await anthropicClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-open' }).messages.create({
      ...chat,
      model: 'claude-sonnet-4-5',
    });
    const before = rig.sim.requests.length;
    const error = await rejection(() =>
      anthropicClient(rig.agent, { 'X-Svc-Budget-Id': FOREIGN, 'X-Svc-Execution-Id': 'exec-open' }).messages.create({
        ...chat,
        model: 'claude-sonnet-4-5',
      }),
    );
    expect(error).toBeInstanceOf(AnthropicError);
    expect((error as AnthropicError).status).toBe(403);
    expect((error as AnthropicError).message).toContain('SVC-SYS-9004');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('refuses it in the provider format on a path outside the routes too (a metered unclassified call)', async () => {
    const before = rig.sim.requests.length;
    const res = await fetch(`${rig.addresses.proxyUrl}/gemini/v1beta/models/imagen-4.0-generate-001:predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-budget-id': FOREIGN },
      body: JSON.stringify({ instances: [{ prompt: 'a lighthouse' }] }),
    });
    expect(res.status).toBe(403);
    expect(res.headers.get('x-svc-error-code')).toBe('SVC-SYS-9004');
    const body = (await res.json()) as { error: { status: string; message: string; details: { reason: string }[] } };
    expect(body.error.status).toBe('PERMISSION_DENIED');
    expect(body.error.message).toMatch(/^SVC-SYS-9004: /);
    expect(body.error.details[0]?.reason).toBe('SVC-SYS-9004');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('serves the sidecar budget named explicitly, and lets a listed budget through to its lease', async () => {
    const own = await openAiClient(rig.agent, {
      'X-Svc-Budget-Id': rig.budgetId,
      'X-Svc-Execution-Id': 'exec-own',
    }).chat.completions.create(chat);
    expect(own.choices).toHaveLength(1);
    // Listed, so the binding lets it pass; the control plane then refuses a lease on a budget it does not know.
    const error = await rejection(() =>
      openAiClient(rig.agent, {
        'X-Svc-Budget-Id': LISTED,
        'X-Svc-Execution-Id': 'exec-listed',
      }).chat.completions.create(chat),
    );
    expect((error as APIError).code).toBe('SVC-BUD-3002');
  });

  it('refuses an MCP tools/call naming a foreign budget with a JSON-RPC error; the tool never runs', async () => {
    tools.calls.length = 0;
    const res = await fetch(`${rig.addresses.proxyUrl}/mcp/tools/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-svc-budget-id': FOREIGN,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'search', arguments: {} } }),
    });
    expect(res.status).toBe(403);
    const body = (await res.json()) as { id: number; error: { message: string; data: { code: string } } };
    expect(body.id).toBe(7);
    expect(body.error.data.code).toBe('SVC-SYS-9004');
    expect(tools.calls).toEqual([]);
  });

  it('refuses the official MCP client naming a foreign budget at initialize', async () => {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${rig.addresses.proxyUrl}/mcp/tools/mcp`), {
      requestInit: { headers: { 'X-Svc-Budget-Id': FOREIGN } },
    });
    const error = await rejection(() => client.connect(transport));
    expect((error as Error).message).toContain('SVC-SYS-9004');
    await client.close();
    expect(tools.calls).toEqual([]);
  });
});
