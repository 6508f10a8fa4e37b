import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export interface ToolServer {
  url: string;
  /** Tool names the server actually ran. */
  calls: string[];
  close(): Promise<void>;
}

/**
 * A small MCP server built with the SDK's server side, stateless over streamable HTTP at `/mcp`,
 * offering `search` and `delete_repo`. `json` selects JSON answers instead of SSE ones.
 */
export async function startToolServer(json: boolean): Promise<ToolServer> {
  const calls: string[] = [];
  const build = () => {
    const server = new McpServer({ name: 'tools', version: '1.0.0' });
    for (const name of ['search', 'delete_repo']) {
      server.registerTool(name, { description: `${name} tool` }, () => {
        calls.push(name);
        return { content: [{ type: 'text', text: `${name} done` }] };
      });
    }
    return server;
  };
  const http: Server = createServer((req, res) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
