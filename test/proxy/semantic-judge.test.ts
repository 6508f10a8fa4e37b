import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyViolationMessage } from '../../core/events/messages.ts';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';
import { openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

/**
 * One SEMANTIC DENY rule on `tool:*` judging `tool_args`: a destructive tool call is refused as
 * DESTRUCTIVE, naming the evidence, and a benign one passes (before, every tool call was refused,
 * as the proxy resolved every semantic condition fail-closed).
 */
let rig: ProxyRig;
let tools: ToolServer;

const DESTRUCTIVE_ARGS = JSON.stringify({ sql: 'DROP TABLE users' });
const BENIGN_ARGS = JSON.stringify({ query: 'weather in Paris tomorrow' });

beforeAll(async () => {
  tools = await startToolServer(true);
  rig = await startProxyRig({ proxy_mcp_servers: `tools=${tools.url}` });
  await rig.addPolicy({
    name: 'no-destructive-tools',
    priority: 500,
    rules: [
      {
        action: 'tool:*',
        effect: 'deny',
        conditions: [{ field: 'tool_args', operator: 'semantic', value: 'DESTRUCTIVE' }],
      },
    ],
  });
});
afterAll(async () => {
  await rig.close();
  await tools.close();
});

function client(execution: string, tool: string, args: string) {
  return openAiClient(rig.agent, { 'X-Svc-Execution-Id': execution, 'x-sim-tool-call': tool, 'x-sim-tool-args': args });
}

const request = {
  model: 'gpt-4o-mini',
  max_tokens: 5,
  messages: [{ role: 'user' as const, content: 'clean up' }],
  tools: [{ type: 'function' as const, function: { name: 'delete_database', parameters: { type: 'object' } } }],
};

async function violationFor(execution: string): Promise<PolicyViolationMessage> {
  const envelopes = new Set(
    rig.cp.published
      .filter((m) => (m.data as { payload?: { execution_id?: string } }).payload?.execution_id === execution)
      .map((m) => (m.data as { envelope_id: string }).envelope_id),
  );
  const found = await eventually(
    () =>
      rig.cp.published.find(
        (m) =>
          m.subject === 'svc.acme.policies.violation' &&
          envelopes.has((m.data as PolicyViolationMessage).envelope_id ?? ''),
      ),
    (m) => m !== undefined,
  );
  return found?.data as PolicyViolationMessage;
}

describe('a SEMANTIC DENY rule on tool_args, through the proxy with the OpenAI SDK', () => {
  it('refuses a whole answer whose tool call drops a table, as DESTRUCTIVE with the evidence', async () => {
    const error = await failure(() =>
      client('exec-sem-whole', 'delete_database', DESTRUCTIVE_ARGS).chat.completions.create(request),
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    expect((error as APIError).message).toContain('judged DESTRUCTIVE');
    expect((error as APIError).message).toContain('DROP TABLE');
    await eventually(
      () =>
        rig.cp.published.some(
          (m) => (m.data as { payload?: { execution_id?: string } }).payload?.execution_id === 'exec-sem-whole',
        ),
      (seen) => seen,
    );
    const violation = await violationFor('exec-sem-whole');
    expect(violation.semantic).toMatchObject({
      judge: 'builtin',
      category: 'DESTRUCTIVE',
      evidence: expect.arrayContaining([
        expect.objectContaining({ field: 'tool_args.sql', signal: 'sql.drop', excerpt: 'DROP TABLE' }),
      ]),
    });
  });

  it('lets a benign tool call through under the same rule', async () => {
    const answer = await client('exec-sem-benign', 'search', BENIGN_ARGS).chat.completions.create(request);
    expect(answer.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'search', arguments: BENIGN_ARGS },
    });
  });

  it('cuts a stream before the event that completes a destructive call, and relays a benign stream whole', async () => {
    const error = await failure(async () => {
      const stream = await client('exec-sem-stream', 'delete_database', DESTRUCTIVE_ARGS).chat.completions.create({
        ...request,
        stream: true,
      });
      for await (const chunk of stream)
        if (chunk.choices[0]?.finish_reason) throw new Error('the completing event reached the client');
    });
    expect(error).toBeInstanceOf(APIError);
    expect((error as Error).message).toContain('SVC-POL-2001');
    expect((error as Error).message).toContain('judged DESTRUCTIVE');

    const stream = await client('exec-sem-stream-ok', 'search', BENIGN_ARGS).chat.completions.create({
      ...request,
      stream: true,
    });
    let args = '';
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      args += chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments ?? '';
      finish ??= chunk.choices[0]?.finish_reason;
    }
    expect(args).toBe(BENIGN_ARGS);
    expect(finish).toBe('tool_calls');
  });

  it('judges the Responses API stream the same way', async () => {
    const error = await failure(async () => {
      const stream = await client('exec-sem-responses', 'delete_database', DESTRUCTIVE_ARGS).responses.create({
        model: 'gpt-4.1',
        input: 'clean up',
        stream: true,
      });
      for await (const event of stream)
        if (event.type === 'response.output_item.done') throw new Error('the completing event reached the client');
    });
    expect((error as Error).message).toContain('judged DESTRUCTIVE');
  });

  it('refuses an MCP tools/call whose arguments are destructive and forwards a benign one', async () => {
    const mcp = new Client({ name: 'agent', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${rig.addresses.proxyUrl}/mcp/tools/mcp`), {
      requestInit: { headers: { 'X-Svc-Execution-Id': 'exec-sem-mcp' } },
    });
    await mcp.connect(transport);
    try {
      const ok = await mcp.callTool({ name: 'search', arguments: { query: 'weather in Paris' } });
      expect(ok.content).toEqual([{ type: 'text', text: 'search done' }]);
      const error = await failure(() =>
        mcp.callTool({ name: 'search', arguments: { query: 'rm -rf / --no-preserve-root' } }),
      );
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).message).toContain('judged DESTRUCTIVE');
      expect(tools.calls).toEqual(['search']);
    } finally {
      await mcp.close();
    }
  });
});
