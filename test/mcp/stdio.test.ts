import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { callFails, callOk } from './mcp-client.ts';

const ENTRY = fileURLToPath(new URL('../../control-plane/mcp/stdio.ts', import.meta.url));

let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'stdio-a');
}, 60_000);
afterAll(async () => cp.close());

/** The stdio entry spawned as a desktop assistant would, with the SDK's stdio client. */
async function spawnEntry(env: Record<string, string>): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [ENTRY],
    env: { PATH: process.env.PATH ?? '', ...env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'desktop-assistant', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

describe('npm run mcp (stdio entry)', () => {
  it('serves the control plane’s tools over stdio by forwarding to its /mcp', async () => {
    const client = await spawnEntry({ SVC_MCP_CONTROL_PLANE_URL: cp.url, SVC_MCP_API_KEY: key });
    try {
      expect((await client.listTools()).tools).toHaveLength(19);
      const created = await callOk(client, 'create_budget', { name: 'desk', limit_amount: 10, period: 'MONTHLY' });
      // Written by the control plane, as the key's tenant: REST reads it back.
      const rest = await cp.call('GET', `/v1/budgets/${created.budget.id}`, { key });
      expect(rest.body).toMatchObject({ tenant_id: 'stdio-a', name: 'desk' });
      expect((await callFails(client, 'get_policy', { policy_id: 'nope' })).code).toBe('SVC-POL-2002');
      const invalid = await client.callTool({ name: 'get_policy', arguments: {} }).catch((e: unknown) => e);
      expect(invalid).toBeInstanceOf(McpError);
      expect((invalid as McpError).message).toBe(
        'MCP error -32602: invalid params: policy_id: Invalid input: expected string, received undefined',
      );
      expect((await client.listResources()).resources).toHaveLength(4);
    } finally {
      await client.close();
    }
  }, 60_000);

  it('refuses to start, naming why on stderr, without its settings or with a key the control plane refuses', async () => {
    const run = (env: Record<string, string>) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, [ENTRY], { env: { PATH: process.env.PATH ?? '', ...env } }, (error, _out, stderr) =>
          resolve({ code: error === null ? 0 : (error.code as number | null), stderr }),
        );
      });
    const missing = await run({ SVC_MCP_CONTROL_PLANE_URL: cp.url });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('SVC_MCP_API_KEY: required for the stdio MCP entry');
    const refused = await run({ SVC_MCP_CONTROL_PLANE_URL: cp.url, SVC_MCP_API_KEY: 'not-a-valid-key-at-all' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/stdio MCP entry failed to start: .*SVC-SYS-9003/);
    expect(refused.stderr).not.toContain('not-a-valid-key-at-all');
  }, 60_000);
});
