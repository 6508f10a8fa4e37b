import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  seedFleetTenant,
  type ControlPlaneProcess,
} from '../harness/processes.ts';
import { callOk, mcpClient } from './mcp-client.ts';

/** The MCP surface of a control-plane process as a cluster runs it (`node control-plane/main.ts`). */
describe('MCP on a control-plane process', () => {
  let nats: NatsServer;
  let cp: ControlPlaneProcess;
  let client: Client | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
    cp = await controlPlaneProcess(nats.url);
    await cp.start();
    const tenant = await seedFleetTenant(cp, 'mcp-process', { max_cost_usd: 10 });
    client = await mcpClient(cp.url, tenant.apiKey);
  }, 120_000);

  afterAll(async () => {
    await client?.close();
    await killAllProcesses();
    await nats.stop();
  });

  it('lists the 19 tools, and a policy made and switched on over MCP decides on MCP and REST', async () => {
    const mcp = client;
    if (mcp === undefined) throw new Error('no MCP client');
    expect((await mcp.listTools()).tools).toHaveLength(19);
    const { policy } = await callOk(mcp, 'create_policy', {
      name: 'no-shell',
      policy_type: 'content_filter',
      rules: { 'deny-shell': { action: 'tool:shell', effect: 'deny' } },
    });
    const check = () => callOk(mcp, 'check_governance', { action: 'tool:shell', input_text: 'ls' });
    expect((await check()).decision).toBe('ALLOW');
    await callOk(mcp, 'update_policy_status', { policy_id: policy.id, status: 'ACTIVE' });
    expect((await check()).decision).toBe('DENY');
    const rest = await cp.rest('POST', '/v1/policies/evaluate', {
      tenant: 'mcp-process',
      body: { action: 'tool:shell' },
    });
    expect(rest.body).toMatchObject({ effect: 'deny' });
    const read = await mcp.readResource({ uri: 'policies://active' });
    expect(read.contents[0]?.mimeType).toBe('application/json');
  });
});
