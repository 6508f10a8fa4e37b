import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { metricValue } from '../harness/processes.ts';
import { startToolServer, type ToolServer } from '../proxy/mcp-server.ts';
import { chat } from './agent-calls.ts';

const fleet = useFleet({ tenants: { full: { max_cost_usd: 100, max_tokens: 10_000_000 } } });
const OUTBOX_ENTRIES = 4;

let tools: ToolServer;
beforeAll(async () => {
  tools = await startToolServer(true);
});
afterAll(async () => tools.close());

/** A tools/call through the proxy's reverse route to the tool server; a refusal comes back as its SVC code. */
async function callTool(proxyUrl: string): Promise<string | null> {
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${proxyUrl}/mcp/tools/mcp`)));
  try {
    await client.callTool({ name: 'search', arguments: {} });
    return null;
  } catch (error) {
    if (!(error instanceof McpError)) throw error;
    return String((error.data as { code?: unknown }).code);
  } finally {
    await client.close();
  }
}

const chatCalls = () => fleet.sim.requests.filter((r) => r.path === '/v1/chat/completions').length;

describe('a proxy whose outbox is full', () => {
  it('refuses the LLM and tool calls it could not record, before anything is sent, and serves again once the bus took its events', async () => {
    const tenant = fleet.tenant('full');
    const proxy = await fleet.proxy(tenant, {
      SVC_PROXY_OUTBOX_MAX_ENTRIES: String(OUTBOX_ENTRIES),
      SVC_PROXY_MCP_SERVERS: `tools=${tools.url}`,
    });
    await proxy.start();
    const depth = async () => metricValue(await proxy.metrics(), 'svc_proxy_outbox_depth') ?? -1;
    // The pod's envelope is opened and announced while the bus is up.
    expect(await chat(proxy, 'gpt-4o-mini')).toEqual({ status: 200, code: null });
    await eventually(depth, (d) => d === 0, 10_000);

    await fleet.nats.stop();
    // Served, on the soft limit, while their events fit.
    for (let i = 0; i < OUTBOX_ENTRIES; i++)
      expect(await chat(proxy, 'gpt-4o-mini')).toEqual({ status: 200, code: null });
    expect(await depth()).toBe(OUTBOX_ENTRIES);
    const sent = chatCalls();
    expect(await chat(proxy, 'gpt-4o-mini')).toEqual({ status: 503, code: 'SVC-EVT-4001' });
    expect(await chat(proxy, 'gpt-4o')).toEqual({ status: 503, code: 'SVC-EVT-4001' });
    expect(chatCalls()).toBe(sent);
    // A tool call is recorded too, allowed or not: it is not made either.
    expect(await callTool(proxy.proxyUrl)).toBe('SVC-EVT-4001');
    expect(tools.calls).toEqual([]);
    const refused = 'provider="openai",model="gpt-4o-mini",decision="unrecorded"';
    expect(metricValue(await proxy.metrics(), 'svc_proxy_requests_total', refused)).toBe(1);

    await fleet.nats.restart();
    await eventually(depth, (d) => d === 0, 20_000);
    expect(await chat(proxy, 'gpt-4o-mini')).toEqual({ status: 200, code: null });
    expect(await callTool(proxy.proxyUrl)).toBeNull();
    expect(tools.calls).toEqual(['search']);
    // Every call served is on record at the control plane, and none that was refused.
    const calls = async (): Promise<number> => {
      const res = await fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId });
      return Number((res.body as { llm_calls: number }).llm_calls);
    };
    expect(await eventually(calls, (n) => n >= OUTBOX_ENTRIES + 2, 20_000)).toBe(OUTBOX_ENTRIES + 2);
  }, 90_000);
});
