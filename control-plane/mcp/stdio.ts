import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { loadConfig } from '../../core/config/load.ts';
import { requiredSetting } from '../../core/config/required.ts';
import { loggableUrl } from '../../core/observability/redact.ts';
import { failedToStart } from '../../core/observability/shutdown.ts';
import { RpcError } from './errors.ts';
import { MCP_SERVER_NAME } from './server.ts';

/** An upstream JSON-RPC error passed on as it came (the SDK client prefixes its message with the code). */
function passOn(error: unknown): never {
  if (error instanceof McpError) {
    const data = typeof error.data === 'object' && error.data !== null ? (error.data as Record<string, unknown>) : {};
    throw new RpcError(error.code, error.message.replace(/^MCP error -?\d+: /, ''), data);
  }
  throw error;
}

/**
 * `npm run mcp`: the control plane's MCP tools and resources over stdio, for desktop assistants.
 * It holds no tool of its own: every request is forwarded to the `/mcp` endpoint of the control
 * plane at SVC_MCP_CONTROL_PLANE_URL with the key SVC_MCP_API_KEY, and answered as it came back.
 * Nothing but protocol messages is written to stdout.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const base = requiredSetting(config.mcp_control_plane_url, 'SVC_MCP_CONTROL_PLANE_URL', 'stdio MCP entry');
  const key = requiredSetting(config.mcp_api_key, 'SVC_MCP_API_KEY', 'stdio MCP entry');
  const upstream = new Client({ name: `${MCP_SERVER_NAME}-stdio`, version: config.version });
  const endpoint = new URL('/mcp', base);
  await upstream
    .connect(
      new StreamableHTTPClientTransport(endpoint, { requestInit: { headers: { authorization: `Bearer ${key}` } } }),
    )
    .catch((error: unknown) => {
      throw new Error(`${loggableUrl(endpoint)}: ${error instanceof Error ? error.message : String(error)}`);
    });
  const server = new Server(
    { name: MCP_SERVER_NAME, version: upstream.getServerVersion()?.version ?? config.version },
    { capabilities: { tools: {}, resources: {} }, instructions: upstream.getInstructions() },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request) => upstream.listTools(request.params).catch(passOn));
  server.setRequestHandler(CallToolRequestSchema, (request) => upstream.callTool(request.params).catch(passOn));
  server.setRequestHandler(ListResourcesRequestSchema, (request) =>
    upstream.listResources(request.params).catch(passOn),
  );
  server.setRequestHandler(ReadResourceRequestSchema, (request) => upstream.readResource(request.params).catch(passOn));
  server.onclose = () => {
    void upstream.close().finally(() => process.exit(0));
  };
  await server.connect(new StdioServerTransport());
}

main().catch((error: unknown) => failedToStart('stdio MCP entry', error));
