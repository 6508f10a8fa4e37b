import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';
import { openAiClient } from './sdk-options.ts';

let rig: ProxyRig;
let sseServer: ToolServer;
let jsonServer: ToolServer;

beforeAll(async () => {
  sseServer = await startToolServer(false);
  jsonServer = await startToolServer(true);
  rig = await startProxyRig({ proxy_mcp_servers: `sse=${sseServer.url},json=${jsonServer.url}` });
  await rig.addPolicy({ name: 'no-gpt-4', rules: [{ action: 'llm:gpt-4*', effect: 'deny' }], priority: 500 });
  await rig.addPolicy({ name: 'no-deletes', rules: [{ action: 'tool:delete_repo', effect: 'deny' }], priority: 400 });
});
afterAll(async () => {
  await rig.close();
  await sseServer.close();
  await jsonServer.close();
});

describe('policies enforced in the proxy', () => {
  it('refuses a denied model with 403 SVC-POL-2001 in the OpenAI format and publishes the violation', async () => {
    const before = rig.sim.requests.length;
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-denied' });
    let error: unknown;
    try {
      await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(APIError);
    const apiError = error as APIError;
    expect(apiError.status).toBe(403);
    expect(apiError.code).toBe('SVC-POL-2001');
    expect(apiError.message).toContain('no-gpt-4');
    expect(rig.sim.requests.length).toBe(before);
    const violation = await eventually(
      () =>
        rig.cp.published.find(
          (m) =>
            m.subject === 'svc.acme.policies.violation' &&
            (m.data as { denied_action: string }).denied_action === 'llm:gpt-4o',
        ),
      (m) => m !== undefined,
    );
    expect(violation?.data).toMatchObject({ tenant_id: 'acme', decision: 'DENY' });

    const allowed = await client.chat.completions.create({
      model: 'gpt-3.5-turbo',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(allowed.choices[0]?.message.content?.trim().split(' ')).toHaveLength(4);
  });

  for (const form of ['sse', 'json'] as const) {
    it(`hides a denied MCP tool from tools/list and refuses its tools/call with a JSON-RPC error (${form} answers)`, async () => {
      const server = form === 'sse' ? sseServer : jsonServer;
      const client = new Client({ name: 'agent', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${rig.addresses.proxyUrl}/mcp/${form}/mcp`), {
        requestInit: { headers: { 'X-Svc-Execution-Id': `exec-mcp-${form}` } },
      });
      await client.connect(transport);
      try {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name)).toEqual(['search']);

        const ok = await client.callTool({ name: 'search', arguments: {} });
        expect(ok.content).toEqual([{ type: 'text', text: 'search done' }]);

        let error: unknown;
        try {
          await client.callTool({ name: 'delete_repo', arguments: {} });
        } catch (caught) {
          error = caught;
        }
        expect(error).toBeInstanceOf(McpError);
        expect((error as McpError).code).toBe(-32000);
        expect((error as McpError).message).toContain('SVC-POL-2001');
        expect(server.calls).toEqual(['search']);
      } finally {
        await client.close();
      }
      const toolEvents = await eventually(
        () =>
          rig.cp.published.filter(
            (m) =>
              m.subject === 'svc.acme.events.tool.call' &&
              (m.data as { payload: { execution_id: string } }).payload.execution_id === `exec-mcp-${form}`,
          ),
        (list) => list.length === 2,
      );
      expect(toolEvents.map((m) => (m.data as { payload: { tool: string; blocked: boolean } }).payload)).toEqual([
        expect.objectContaining({ tool: 'search', blocked: false, source: 'mcp' }),
        expect.objectContaining({ tool: 'delete_repo', blocked: true, source: 'mcp' }),
      ]);
      server.calls.length = 0;
    });
  }
});
