import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { TenantIdSchema } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { Authenticator } from '../auth/authenticator.ts';
import type { RequestRate } from '../auth/request-rate.ts';
import type { ControlPlaneMetrics } from '../observability/metrics.ts';
import { resolveTenant } from '../auth/tenancy.ts';
import type { Tenants } from '../tenants/tenants.ts';
import { mcpServerFor, type McpSurface } from './server.ts';

export interface McpHttpDeps {
  surface: McpSurface;
  authenticator: Authenticator;
  tenants: Tenants;
  version: string;
  documentationBase: () => string;
  log: Logger;
  metrics: ControlPlaneMetrics;
  /** The caller's one request count, shared with REST and gRPC. */
  requestRate: RequestRate;
}

/** The request headers the streamable HTTP transport reads. */
const TRANSPORT_HEADERS = ['accept', 'content-type', 'mcp-protocol-version', 'mcp-session-id'] as const;

function rpcError(reply: FastifyReply, status: number, code: number, message: string) {
  return reply.code(status).type('application/json').send({ jsonrpc: '2.0', id: null, error: { code, message } });
}

/**
 * `POST /mcp` (spec 4.7): JSON-RPC 2.0 over the SDK's streamable HTTP transport in stateless mode,
 * with JSON answers. Stateless because every request carries its credential and is answered whole:
 * no session lives in one replica's memory, so any replica behind the load balancer serves any
 * request, and nothing is held for clients that go away. The credential is checked before the
 * body is read (401 on failure, no JSON-RPC work); then malformed JSON is -32700, a body that is
 * not JSON-RPC -32600, and everything else is the SDK server's.
 */
export async function mcpRoutes(app: FastifyInstance, deps: McpHttpDeps): Promise<void> {
  await app.register((scope, _options, done) => {
    // The body reaches the handler as text, so a parse error is answered in JSON-RPC terms.
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
      done(null, body);
    });

    scope.get('/mcp/health', { config: { rateLimit: false } }, () => ({ service: 'mcp', status: 'ok' }));

    // No server-sent stream and no session to end in stateless mode; clients expect 405 here.
    scope.route({
      method: ['GET', 'DELETE'],
      url: '/mcp',
      config: { rateLimit: false },
      handler: (_request, reply) => {
        void reply.header('allow', 'POST');
        return rpcError(reply, 405, -32000, 'method not allowed: this endpoint is stateless; POST JSON-RPC messages');
      },
    });

    scope.post('/mcp', {
      onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
        try {
          request.principal = await deps.authenticator.authenticate(request.headers, request.ip);
        } catch (error) {
          if (error instanceof SvcError && error.code === 'SVC-SYS-9003')
            void reply.header('www-authenticate', 'Bearer realm="mcp"');
          throw error;
        }
      },
      handler: async (request, reply) => {
        const principal = request.principal;
        if (principal === undefined)
          throw new SvcError('SVC-SYS-9003', 'missing credentials: send X-Api-Key or Authorization: Bearer');
        const raw = request.headers['x-tenant-id'];
        const header = Array.isArray(raw) ? raw.join(',') : raw;
        if (header !== undefined && !TenantIdSchema.safeParse(header).success)
          throw new SvcError('SVC-SYS-9002', 'invalid request: X-Tenant-ID: not a tenant id', {}, [
            { field: 'X-Tenant-ID', description: 'letters, digits, _ and -, at most 64' },
          ]);
        const tenant = await resolveTenant(principal, deps.tenants, { header });
        const text = typeof request.body === 'string' ? request.body : '';
        let message: unknown;
        try {
          message = JSON.parse(text);
        } catch {
          return rpcError(reply, 400, -32700, 'parse error: the body is not valid JSON');
        }
        const messages = Array.isArray(message) ? message : [message];
        if (messages.length === 0 || !messages.every((m) => JSONRPCMessageSchema.safeParse(m).success))
          return rpcError(reply, 400, -32600, 'invalid request: not a JSON-RPC 2.0 message');
        // Each message of a batch counts as a request: the HTTP request took one already.
        for (let i = 1; i < messages.length; i++) await deps.requestRate.take(principal);

        const caller = { principal, tenant, requestId: request.id };
        const server = mcpServerFor(deps.surface, caller, {
          version: deps.version,
          documentationBase: deps.documentationBase(),
          log: deps.log,
          count: (tool, outcome) => deps.metrics.mcpToolCalls.inc({ tool, outcome }),
        });
        const transport = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        try {
          await server.connect(transport);
          const headers = new Headers();
          for (const name of TRANSPORT_HEADERS) {
            const value = request.headers[name];
            if (typeof value === 'string') headers.set(name, value);
          }
          const response = await transport.handleRequest(
            new Request('http://mcp.local/mcp', { method: 'POST', headers }),
            { parsedBody: message },
          );
          const body = await response.text();
          response.headers.forEach((value, name) => {
            void reply.header(name, value);
          });
          return reply.code(response.status).send(body === '' ? undefined : body);
        } finally {
          await server.close();
        }
      },
    });
    done();
  });
}
