import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ZodOpenApiOperationObject, ZodOpenApiResponsesObject } from 'zod-openapi';
import { ErrorBodySchema, parseOrThrow, SvcError } from '../../core/errors/index.ts';
import type { Principal, Scope } from '../../core/domain/index.ts';
import { requireAdministrator, requireScope } from '../auth/scopes.ts';
import { requestedTenant, resolveTenant } from '../auth/tenancy.ts';
import type { Caller } from '../caller.ts';
import type { Tenants } from '../tenants/tenants.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

/** Who may call a route: a scope, any platform administrator, any valid credential, or anyone. */
export type Access = Scope | 'administrator' | 'authenticated' | 'public';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  contentType?: string;
}

export interface RouteContext<B, Q, P, A extends Access = Access> {
  body: B;
  query: Q;
  params: P;
  /** The authenticated caller and its tenant; public routes have none, and no other route runs without one. */
  caller: A extends 'public' ? undefined : Caller;
  request: FastifyRequest;
}

type Out<T> = T extends z.ZodType ? z.output<T> : undefined;

export interface RouteSpec<
  B extends z.ZodType | undefined,
  Q extends z.ZodType | undefined,
  P extends z.ZodType | undefined,
  A extends Access = Access,
> {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** OpenAPI form: `/v1/envelopes/{envelope_id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  access: A;
  body?: B;
  /** The body may be left out entirely (spec: TerminateRequest, BudgetCheckRequest). */
  bodyOptional?: boolean;
  /** Whether a `tenant_id` in the body or query names the tenant acted for (default true). */
  tenantFromInput?: boolean;
  query?: Q;
  params?: P;
  responses: Record<number, ResponseSpec>;
  handler: (ctx: RouteContext<Out<B>, Out<Q>, Out<P>, A>) => Promise<Reply> | Reply;
}

export interface RouteTable {
  add<
    B extends z.ZodType | undefined,
    Q extends z.ZodType | undefined,
    P extends z.ZodType | undefined,
    A extends Access,
  >(
    spec: RouteSpec<B, Q, P, A>,
  ): void;
  /** What the OpenAPI document is made of. */
  operations(): Array<{ path: string; method: string; operation: ZodOpenApiOperationObject }>;
}

type ResponseSpec = { description: string; schema?: z.ZodType; contentType?: string; headers?: z.ZodObject };

/**
 * The errors every authenticated route can answer with, whatever its own responses say, so the
 * document shows clients all the statuses they must handle.
 */
function commonResponses(spec: { access: Access; method: string; params?: unknown }): Record<number, ResponseSpec> {
  const invalid: ResponseSpec = {
    description: 'invalid request (SVC-SYS-9002), naming the field: body, query, path or X-Tenant-ID',
    schema: ErrorBodySchema,
  };
  // A public route reads no credential and no tenant, but its path parameters are bounded too.
  if (spec.access === 'public') return spec.params === undefined ? {} : { 400: invalid };
  const responses: Record<number, ResponseSpec> = {
    400: invalid,
    401: { description: 'missing, invalid, expired or revoked credentials (SVC-SYS-9003)', schema: ErrorBodySchema },
    403: {
      description: 'the credential lacks the scope or names another tenant (SVC-SYS-9004)',
      schema: ErrorBodySchema,
    },
    404: {
      description: 'a platform administrator named a tenant that does not exist (SVC-SYS-9006)',
      schema: ErrorBodySchema,
    },
    429: { description: 'rate limit of the API key exceeded (SVC-SYS-9005); see retry-after', schema: ErrorBodySchema },
  };
  // Whatever the route reads, the server parses any body sent with a method that carries one.
  if (spec.method !== 'GET')
    responses[413] = { description: 'request body too large (SVC-SYS-9009)', schema: ErrorBodySchema };
  return responses;
}

/**
 * A route's responses with the common ones: where both describe a status, the document names
 * both causes and the body is either schema, so neither kind of answer falls outside it.
 */
function allResponses(spec: {
  access: Access;
  method: string;
  params?: unknown;
  responses: Record<number, ResponseSpec>;
}) {
  const merged: Record<number, ResponseSpec> = { ...commonResponses(spec) };
  for (const [key, own] of Object.entries(spec.responses)) {
    const status = Number(key);
    const common = merged[status];
    if (common?.schema === undefined || own.schema === undefined || common.schema === own.schema) merged[status] = own;
    else
      merged[status] = {
        description: `${own.description}; or ${common.description}`,
        schema: z.union([own.schema, common.schema]),
      };
  }
  return merged;
}

/** The onRequest hook that refuses a principal lacking the route's scope or administrator role. */
function authorizeFor(access: Access) {
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void => {
    const principal = request.principal;
    try {
      if (principal !== undefined) {
        if (access === 'administrator') requireAdministrator(principal);
        else if (access !== 'authenticated' && access !== 'public') requireScope(principal, access);
      }
      done();
    } catch (error) {
      done(error as Error);
    }
  };
}

function tenantField(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const field = record.tenant_id ?? record.tenantId;
  return typeof field === 'string' ? field : undefined;
}

/**
 * Registers routes with fastify and records each for the OpenAPI document, so the document is
 * made of the very schemas that validate requests. Every route validates with zod (errors name
 * the field), resolves the caller's tenant and checks its scope before the handler runs.
 */
export function createRouteTable(
  app: FastifyInstance,
  deps: { tenants: Tenants; authenticate: (request: FastifyRequest) => Promise<void> },
): RouteTable {
  const operations: Array<{ path: string; method: string; operation: ZodOpenApiOperationObject }> = [];
  return {
    operations: () => operations,
    add(spec) {
      // A literal colon (`/v1/checkpoints:query`) is escaped; `{name}` becomes the parameter `:name`.
      const fastifyPath = spec.path.replace(/:/g, '::').replace(/\{(\w+)\}/g, ':$1');
      app.route({
        method: spec.method,
        url: fastifyPath,
        config: { rateLimit: spec.access === 'public' ? false : undefined },
        // Credential and permission are checked before the body is even parsed: a caller that may
        // not use the route learns nothing about what it would have accepted.
        ...(spec.access === 'public' ? {} : { onRequest: [deps.authenticate, authorizeFor(spec.access)] }),
        handler: async (request: FastifyRequest, reply: FastifyReply) => {
          // The onRequest hooks set the principal or refused; a route reached without one (a hook
          // that did not run) is refused here, before anything is read, rather than run for nobody.
          const principal = request.principal;
          if (spec.access !== 'public' && (principal === undefined || principal.tenant_id === ''))
            throw new SvcError('SVC-SYS-9003', 'missing credentials: send X-Api-Key or Authorization: Bearer');
          // Only an empty body is an absent one: a JSON `null` is a body, and not an object.
          const rawBody = request.body === undefined ? (spec.bodyOptional ? {} : undefined) : request.body;
          if (spec.body !== undefined && rawBody === undefined) {
            throw new SvcError('SVC-SYS-9002', 'invalid request: a JSON body is required', {}, [
              { field: '(body)', description: 'required' },
            ]);
          }
          const body = spec.body === undefined ? undefined : parseOrThrow(spec.body, rawBody, 'body');
          const query = spec.query === undefined ? undefined : parseOrThrow(spec.query, request.query, 'query');
          const params = spec.params === undefined ? undefined : parseOrThrow(spec.params, request.params, 'path');
          let caller: Caller | undefined;
          if (spec.access !== 'public' && principal !== undefined) {
            const tenant = await resolveTenant(
              principal,
              deps.tenants,
              requestedTenant(
                request.headers['x-tenant-id'],
                spec.tenantFromInput === false ? undefined : (tenantField(rawBody) ?? tenantField(request.query)),
              ),
            );
            caller = { principal, tenant, requestId: request.id };
          }
          const result = await spec.handler({ body, query, params, caller, request } as Parameters<
            typeof spec.handler
          >[0]);
          void reply.code(result.status).headers(result.headers ?? {});
          if (result.contentType !== undefined) void reply.type(result.contentType);
          return reply.send(result.body ?? null);
        },
      });
      const responses: ZodOpenApiResponsesObject = {};
      for (const [status, r] of Object.entries(allResponses(spec))) {
        responses[status as `${1 | 2 | 3 | 4 | 5}${string}`] =
          r.schema === undefined
            ? { description: r.description }
            : {
                description: r.description,
                content: { [r.contentType ?? 'application/json']: { schema: r.schema } },
                ...(r.headers !== undefined ? { headers: r.headers } : {}),
              };
      }
      const operation: ZodOpenApiOperationObject = {
        operationId: spec.operationId,
        summary: spec.summary,
        tags: [spec.tag],
        ...(spec.access === 'public' ? { security: [] } : {}),
        ...(spec.query !== undefined || spec.params !== undefined
          ? {
              requestParams: {
                ...(spec.query !== undefined ? { query: spec.query as never } : {}),
                ...(spec.params !== undefined ? { path: spec.params as never } : {}),
              },
            }
          : {}),
        ...(spec.body !== undefined
          ? { requestBody: { required: !spec.bodyOptional, content: { 'application/json': { schema: spec.body } } } }
          : {}),
        responses,
      };
      operations.push({ path: spec.path, method: spec.method.toLowerCase(), operation });
    },
  };
}
