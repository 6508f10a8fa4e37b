import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Caller } from '../caller.ts';
import { asSvcError } from '../rest/render-error.ts';
import { RpcError, toolFailure } from './errors.ts';
import { mcpResources, readResource } from './resources.ts';
import type { McpServices } from './services.ts';
import type { McpTool } from './tool.ts';
import { apiKeyTools } from './tools/api-keys.ts';
import { approvalTools } from './tools/approvals.ts';
import { budgetTools } from './tools/budgets.ts';
import { observabilityTools } from './tools/observability.ts';
import { policyTools } from './tools/policies.ts';

export const MCP_SERVER_NAME = 'agent-governance';

/** The tools and resources of spec 4.7, built once per process over the domain services. */
export interface McpSurface {
  tools: ReadonlyMap<string, McpTool>;
  resources: ReturnType<typeof mcpResources>;
}

export function createMcpSurface(services: McpServices): McpSurface {
  const tools = [
    ...policyTools(services),
    ...budgetTools(services),
    ...approvalTools(services),
    ...apiKeyTools(services),
    ...observabilityTools(services),
  ];
  return { tools: new Map(tools.map((t) => [t.name, t])), resources: mcpResources(services) };
}

export interface McpServerOptions {
  version: string;
  documentationBase: string;
  log: Logger;
  /** Counts each tool call by outcome (svc_mcp_tool_calls_total). */
  count: (tool: string, outcome: string) => void;
}

/**
 * The SDK's server for one authenticated request: every handler acts as `caller`. Domain failures
 * of a tool become results with `isError` (errors.ts); a resource has no such result, so its
 * failures are JSON-RPC errors carrying the SVC code.
 */
export function mcpServerFor(surface: McpSurface, caller: Caller, options: McpServerOptions): Server {
  const server = new Server(
    { name: MCP_SERVER_NAME, version: options.version },
    {
      capabilities: { tools: {}, resources: {} },
      instructions:
        'Governance of AI agents: policies, budgets, approvals, API keys, metrics and the audit log of your tenant.',
    },
  );
  const failed = (error: unknown) => {
    const svc = asSvcError(error);
    if (svc.code === 'SVC-SYS-9007') options.log.error({ err: error, request_id: caller.requestId }, 'mcp call failed');
    return svc;
  };
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [...surface.tools.values()].map((t) => t.definition),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = surface.tools.get(request.params.name);
    if (tool === undefined)
      throw new RpcError(-32602, `invalid params: name: no tool ${request.params.name}`, {
        code: 'SVC-SYS-9002',
        field_violations: [{ field: 'name', description: 'no such tool' }],
      });
    const log = (outcome: string) => {
      options.count(tool.name, outcome);
      options.log.info({ request_id: caller.requestId, tool: tool.name, outcome }, 'mcp tool call');
    };
    try {
      const result = await tool.call(caller, request.params.arguments);
      log('ok');
      return result;
    } catch (error) {
      if (error instanceof RpcError) {
        log(typeof error.data.code === 'string' ? error.data.code : String(error.code));
        throw error;
      }
      const svc = failed(error);
      log(svc.code);
      return toolFailure(svc, caller.requestId, options.documentationBase);
    }
  });
  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: surface.resources.map((r) => r.definition),
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    try {
      return await readResource(surface.resources, caller, request.params.uri);
    } catch (error) {
      if (error instanceof RpcError) throw error;
      const svc = failed(error);
      throw new RpcError(svc.spec.jsonrpc, `${svc.code}: ${svc.message}`, {
        code: svc.code,
        request_id: caller.requestId,
      });
    }
  });
  return server;
}
