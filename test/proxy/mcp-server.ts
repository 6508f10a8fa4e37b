import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export interface ToolServer {
  url: string;
  /** Tool names the server actually ran, one entry per execution. */
  calls: string[];
  /** HTTP requests the server received, whatever became of them. */
  readonly requests: number;
  close(): Promise<void>;
}

/**
 * A small MCP server built with the SDK's server side, stateless over streamable HTTP at `/mcp`,
 * offering `tools` (`search` and `delete_repo` unless named). `json` selects JSON answers instead of SSE ones.
 */
export async function startToolServer(
  json: boolean,
  tools: readonly string[] = ['search', 'delete_repo'],
): Promise<ToolServer> {
  const calls: string[] = [];
  let requests = 0;
  const build = () => {
    const server = new McpServer({ name: 'tools', version: '1.0.0' });
    for (const name of tools) {
      server.registerTool(name, { description: `${name} tool` }, () => {
        calls.push(name);
        return { content: [{ type: 'text', text: `${name} done` }] };
      });
    }
    return server;
  };
  const http: Server = createServer((req, res) => {
    requests++;
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
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

/** How a scripted server answers `tools/list`: the status, headers and body bytes. */
export interface ScriptedAnswer {
  headers: Record<string, string>;
  body: Buffer;
}

export const LISTED_TOOLS = [
  { name: 'search', inputSchema: { type: 'object' } },
  { name: 'delete_repo', inputSchema: { type: 'object' } },
];

/** A tools/list answer as an SSE event, gzip-encoded although the proxy asked for identity. */
export function gzipSseAnswer(id: unknown): ScriptedAnswer {
  const event = `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, result: { tools: LISTED_TOOLS } })}\n\n`;
  return {
    headers: { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' },
    body: gzipSync(Buffer.from(event)),
  };
}

/** A tools/list answer as JSON, gzip-encoded although the proxy asked for identity. */
export function gzipJsonAnswer(id: unknown): ScriptedAnswer {
  return {
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gzipSync(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, result: { tools: LISTED_TOOLS } }))),
  };
}

/**
 * An MCP server stand-in that answers initialize and notifications as a real one would and
 * `tools/list` as `listAnswer` says: the misbehaving servers the proxy must not relay unfiltered.
 * GET (the optional event stream) gets `streamAnswer`, else 405 as stateless servers answer.
 */
export async function startScriptedServer(
  listAnswer: (id: unknown) => ScriptedAnswer,
  streamAnswer?: ScriptedAnswer,
): Promise<{ url: string; close(): Promise<void> }> {
  const http: Server = createServer((req, res) => {
    if (req.method === 'GET' && streamAnswer !== undefined) {
      res.writeHead(200, streamAnswer.headers).end(streamAnswer.body);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString()) as { id?: unknown; method: string };
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      if (message.method === 'tools/list') {
        const answer = listAnswer(message.id);
        res.writeHead(200, answer.headers).end(answer.body);
        return;
      }
      const result = {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: { tools: {} },
        serverInfo: { name: 'scripted', version: '1.0.0' },
      };
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
