import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** An MCP SDK client connected to a control plane's /mcp with `key` (as Bearer, or as x-api-key). */
export async function mcpClient(
  baseUrl: string,
  key: string,
  options: { header?: 'bearer' | 'x-api-key'; headers?: Record<string, string> } = {},
): Promise<Client> {
  const auth = options.header === 'x-api-key' ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
  const client = new Client({ name: 'governance-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
    requestInit: { headers: { ...auth, ...options.headers } },
  });
  await client.connect(transport);
  return client;
}

/** Calls a tool and returns its structured content, failing on an error result. */
export async function callOk(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (result.isError === true) throw new Error(`${name} failed: ${JSON.stringify(result.structuredContent)}`);
  const text = result.content[0];
  if (text?.type !== 'text' || text.text.length === 0) throw new Error(`${name}: no text content`);
  return result.structuredContent;
}

/** Calls a tool expected to fail as a domain error: its SVC error object. */
export async function callFails(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (result.isError !== true) throw new Error(`${name} succeeded: ${JSON.stringify(result.structuredContent)}`);
  return (result.structuredContent as { error: unknown }).error;
}
