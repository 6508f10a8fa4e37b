import { execFile } from 'node:child_process';
import { isIP } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemResolve, type Resolve } from '../../proxy/egress/index.ts';
import { metricValue, rawConnect, startEcho } from '../proxy-net/harness.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';

const run = promisify(execFile);

/** tools.internal is an in-cluster name: only the proxy resolves it (the agent sends CONNECT). */
const resolve: Resolve = async (hostname) =>
  hostname === 'tools.internal' ? [{ address: '127.0.0.1', family: isIP('127.0.0.1') }] : systemResolve(hostname);

/** An agent process using the official MCP SDK client with nothing but HTTP_PROXY and NODE_USE_ENV_PROXY set. */
const AGENT = `
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
const client = new Client({ name: 'agent', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(process.env.MCP_URL)));
const tools = (await client.listTools()).tools.map((t) => t.name);
const ok = await client.callTool({ name: 'search', arguments: {} });
let denied = 'not refused';
try {
  await client.callTool({ name: 'delete_repo', arguments: {} });
} catch (error) {
  denied = error.message;
}
await client.close();
process.stdout.write(JSON.stringify({ tools, ok: ok.content, denied }));
`;

let rig: ProxyRig;
let tools: ToolServer;
let echo: Awaited<ReturnType<typeof startEcho>>;
let mcpUrl = '';

beforeAll(async () => {
  tools = await startToolServer(false);
  echo = await startEcho();
  mcpUrl = `http://tools.internal:${new URL(tools.url).port}`;
  rig = await startProxyRig({ proxy_mcp_servers: `tools=${mcpUrl}` }, { resolve });
  await rig.addPolicy({ name: 'no-deletes', rules: [{ action: 'tool:delete_repo', effect: 'deny' }], priority: 400 });
});
afterAll(async () => {
  await rig.close();
  await tools.close();
  await echo.close();
});

describe('an MCP server reached over http:// through HTTP_PROXY (Node 24 fetch sends CONNECT)', () => {
  it('governs the official MCP SDK client in a child process: the denied tool is hidden, refused, and never runs', async () => {
    tools.calls.length = 0;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', AGENT], {
      cwd: process.cwd(),
      env: {
        PATH: process.env.PATH,
        HTTP_PROXY: rig.addresses.proxyUrl,
        NODE_USE_ENV_PROXY: '1',
        MCP_URL: `${mcpUrl}/mcp`,
      },
      timeout: 20_000,
    });
    const result = JSON.parse(stdout) as { tools: string[]; ok: unknown; denied: string };
    expect(result.tools).toEqual(['search']);
    expect(result.ok).toEqual([{ type: 'text', text: 'search done' }]);
    expect(result.denied).toContain('SVC-POL-2001');
    expect(tools.calls).toEqual(['search']);
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_connections_total', { mode: 'intercept' }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('refuses another port of the same host, even once a network:connect rule opens it: no blind tunnel to a governed host', async () => {
    const authority = `tools.internal:${echo.port}`;
    const refused = await rawConnect(rig.addresses.proxyPort, authority, 'hello');
    expect(refused).toMatch(/^HTTP\/1\.1 403 /);
    expect(refused).toContain('SVC-ADP-5003');
    expect(await metricValue(rig.proxy.registry, 'svc_proxy_egress_refusals_total', { reason: 'port' })).toBe(1);

    await rig.addPolicy({
      name: 'tools-host-any-port',
      rules: [
        {
          action: 'network:connect',
          effect: 'allow',
          conditions: [{ field: 'host', operator: 'eq', value: 'tools.internal' }],
        },
      ],
      priority: 300,
    });
    // Only the MCP port is governed; a tunnel to another port of its host could carry its calls.
    const answer = await rawConnect(rig.addresses.proxyPort, authority, 'hello');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('tools.internal is governed on other ports only');
    expect(echo.connections).toBe(0);
  });
});
