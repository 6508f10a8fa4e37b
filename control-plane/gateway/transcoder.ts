import type { MethodDefinition, PackageDefinition } from '@grpc/proto-loader';
import { z } from 'zod';
import { MAX_PATH_ID_LENGTH } from '../../core/domain/index.ts';
import { ErrorBodySchema, SvcError } from '../../core/errors/index.ts';
import { requestedTenant, resolveTenant } from '../auth/tenancy.ts';
import type { HttpRule } from '../grpc/http-rules.ts';
import type { GrpcRequest, GrpcServiceHandlers } from '../grpc/server.ts';
import type { RouteTable } from '../rest/route.ts';
import type { Tenants } from '../tenants/tenants.ts';
import type { MessageJson } from './message-json.ts';

export interface TranscoderDeps {
  definition: PackageDefinition;
  rules: readonly HttpRule[];
  /** The gRPC handlers by service, the very ones the gRPC server runs. */
  services: Record<string, GrpcServiceHandlers>;
  json: MessageJson;
  tenants: Tenants;
}

const PATH_VARIABLE = /\{([^}=]+)(?:=[^}]*)?\}/g;

/** `GET /v1/policies/{policy_id}` and `.../{id}` are the same route: variables compare as one. */
function routeKey(verb: string, path: string): string {
  return `${verb.toLowerCase()} ${path.replace(/\{[^}]*\}/g, '{}')}`;
}

function setAt(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    node = (typeof next === 'object' && next !== null ? next : (node[part] = {})) as Record<string, unknown>;
  }
  node[path[path.length - 1] as string] = value;
}

function getAt(source: unknown, path: readonly string[]): unknown {
  let node = source;
  for (const part of path)
    node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[part] : undefined;
  return node;
}

/**
 * The HTTP gateway of the contracts (ARCHITECTURE §7b): one route per `google.api.http` binding,
 * made by this one generic transcoder, so an RPC with a binding has its route. A binding whose
 * verb and path REST already serves is left to that route (its contract's shapes win,
 * ARCHITECTURE §4); a method not served yet gets no route. A transcoded route reads path variables, the body (`*` or the named field)
 * and the query as the binding says, in the proto3 JSON mapping, runs the gRPC handler with the
 * REST route table's authentication, scope and tenancy, and answers the response message as JSON.
 */
export function transcodedRoutes(routes: RouteTable, deps: TranscoderDeps): HttpRule[] {
  const served = new Set(routes.operations().map((o) => routeKey(o.method, o.path)));
  const added: HttpRule[] = [];
  for (const rule of deps.rules) {
    if (served.has(routeKey(rule.verb, rule.path))) continue;
    const handler = deps.services[rule.service]?.[rule.method];
    if (handler === undefined) continue;
    served.add(routeKey(rule.verb, rule.path));
    added.push(rule);
    const method = (deps.definition[rule.service] as Record<string, MethodDefinition<object, object>>)[rule.method]!;
    const pkg = rule.service.slice(0, rule.service.lastIndexOf('.'));
    const requestType = `${pkg}.${(method.requestType.type as { name: string }).name}`;
    const responseType = `${pkg}.${(method.responseType.type as { name: string }).name}`;
    const variables = [...rule.path.matchAll(PATH_VARIABLE)].map(([, variable = '']) => ({
      field: variable.split('.'),
      param: variable.split('.').at(-1) as string,
    }));
    const topOfPath = variables.map((v) => v.field[0] as string);
    const bodyField = rule.body === null || rule.body === '*' ? null : rule.body;
    const bodySchema =
      rule.body === null
        ? undefined
        : rule.body === '*'
          ? deps.json.input(requestType, false, topOfPath)
          : deps.json.input(fieldType(deps.definition, requestType, rule.body));
    const querySchema =
      rule.body === '*'
        ? undefined
        : deps.json.query(requestType, [...topOfPath, ...(bodyField === null ? [] : [bodyField])]);
    const params =
      variables.length === 0
        ? undefined
        : z.object(Object.fromEntries(variables.map((v) => [v.param, z.string().min(1).max(MAX_PATH_ID_LENGTH)])));
    const shortService = rule.service.slice(rule.service.lastIndexOf('.') + 1);
    routes.add({
      method: rule.verb as 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
      path: rule.path.replace(PATH_VARIABLE, (_m, variable: string) => `{${variable.split('.').at(-1) as string}}`),
      operationId: `${shortService}.${rule.method}`,
      summary: `${shortService}.${rule.method}, transcoded from its google.api.http binding (docs/grpc.md)`,
      tag: shortService.replace(/Service$/, '').toLowerCase(),
      access: handler.access,
      ...(bodySchema === undefined ? {} : { body: bodySchema }),
      ...(querySchema === undefined ? {} : { query: querySchema }),
      ...(params === undefined ? {} : { params }),
      responses: {
        200: { description: `${responseType} in the proto3 JSON mapping`, schema: deps.json.output(responseType) },
        ...Object.fromEntries(
          Object.entries(handler.statuses ?? {}).map(([status, description]) => [
            status,
            { description, schema: ErrorBodySchema },
          ]),
        ),
      },
      handler: async ({ body, query, params: pathValues, caller }) => {
        const message = query === undefined ? {} : deps.json.fromQuery(requestType, query);
        if (rule.body === '*') Object.assign(message, body);
        else if (bodyField !== null) message[bodyField] = body;
        for (const v of variables) setAt(message, v.field, (pathValues as Record<string, string>)[v.param]);
        // Through the binary form and back: the handler sees the request exactly as gRPC delivers it.
        const grpcRequest = method.requestDeserialize(method.requestSerialize(message)) as GrpcRequest;
        // A tenant the message names beyond what the route table resolved (`context.tenant_id`)
        // must be the one acted for; an administrator names another with X-Tenant-ID.
        const named =
          handler.tenantField === undefined ? undefined : getAt(grpcRequest, handler.tenantField.split('.'));
        if (typeof named === 'string' && named !== '' && named !== caller.tenant) {
          const field = handler.tenantField as string;
          if (!caller.principal.administrator)
            await resolveTenant(caller.principal, deps.tenants, requestedTenant(undefined, named, field));
          throw new SvcError('SVC-SYS-9002', `invalid request: ${field} differs from the tenant acted for`, {}, [
            { field, description: `differs from ${caller.tenant}, the tenant acted for; send X-Tenant-ID: ${named}` },
          ]);
        }
        const controller = new AbortController();
        try {
          const response = await handler.handle(grpcRequest, { caller, signal: controller.signal });
          return { status: 200, body: deps.json.toJson(responseType, response) };
        } finally {
          controller.abort();
        }
      },
    });
  }
  return added;
}

function fieldType(definition: PackageDefinition, message: string, field: string): string {
  const entry = definition[message] as { type: { field: Array<{ name: string; typeName?: string }> } } | undefined;
  const typeName = entry?.type.field.find((f) => f.name === field)?.typeName;
  if (typeName === undefined) throw new SvcError('SVC-SYS-9007', `${message}.${field} is not a message field`);
  const pkg = message.slice(0, message.lastIndexOf('.'));
  return Object.hasOwn(definition, `${pkg}.${typeName}`) ? `${pkg}.${typeName}` : typeName.replace(/^\./, '');
}
