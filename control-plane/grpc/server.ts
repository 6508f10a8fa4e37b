import {
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import type { Logger } from 'pino';
import type { Scope } from '../../core/domain/index.ts';
import { SvcError, type DocumentationBase } from '../../core/errors/index.ts';
import type { Authenticator } from '../auth/authenticator.ts';
import type { RequestRate } from '../auth/request-rate.ts';
import { requireAdministrator, requireScope } from '../auth/scopes.ts';
import { requestedTenant, resolveTenant } from '../auth/tenancy.ts';
import type { Caller } from '../caller.ts';
import type { Tenants } from '../tenants/tenants.ts';
import { authenticateFirst } from './authenticate-first.ts';
import { firstValue } from './call-metadata.ts';
import { failedCall } from './call-outcome.ts';
import { healthService, type HealthProbe } from './health.ts';
import { createRequestBytes, deferDecoding, SMALL_REQUEST_BYTES } from './request-bytes.ts';

/** Who may call a method: a scope of spec 2.8, any platform administrator, or any valid credential. */
export type GrpcAccess = Scope | 'administrator' | 'authenticated';

/** What a method's handler is given besides its request. */
export interface GrpcCallContext {
  caller: Caller;
  /** Aborted when the call's deadline passes or its client cancels it. */
  signal: AbortSignal;
}

/** The request as @grpc/proto-loader decodes it: field names as written, defaults filled in. */
export type GrpcRequest = Record<string, unknown>;

export interface GrpcMethod {
  access: GrpcAccess;
  /**
   * The request field naming the tenant acted for, as a dotted path (`policy.tenant_id`); an
   * empty value is absent. Like X-Tenant-ID, it may differ from the credential's tenant for
   * administrators only.
   */
  tenantField?: string;
  /**
   * HTTP statuses the method answers besides those every route may (400, 401, 403, 404, 413,
   * 429), with what they mean: its transcoded route documents them.
   */
  statuses?: Record<number, string>;
  /**
   * Its request carries free-form data (JSON, texts to judge): it may be up to `maxMessageBytes`.
   * Any other method's request is refused above SMALL_REQUEST_BYTES before it is decoded.
   */
  largeRequest?: true;
  handle(request: GrpcRequest, context: GrpcCallContext): Promise<object>;
}

/** One service's methods by name; every method of the contract must be listed. */
export type GrpcServiceHandlers = Record<string, GrpcMethod>;

export interface GrpcServerOptions {
  /** The contracts and the health service (`loadServedDefinition()`). */
  definition: PackageDefinition;
  /** The same, compiled, as server reflection serves them (`servedFileDescriptors()`). */
  fileDescriptors: Buffer[];
  /** Handlers by fully qualified service name (`svc.policy.v1.PolicyService`). */
  services: Record<string, GrpcServiceHandlers>;
  authenticator: Authenticator;
  /** Shared with REST: a caller has one limit whichever way it calls. */
  requestRate: RequestRate;
  tenants: Tenants;
  logger: Logger;
  documentationBase: DocumentationBase;
  health: HealthProbe;
  maxMessageBytes: number;
  defaultTimeoutMs: number;
  limits: GrpcLimits;
}

/**
 * What one HTTP/2 connection may hold, and all calls together (docs/grpc.md, Limits): grpc-js
 * sets none of these by default, so one connection could open streams without end and keep them
 * for ever, and calls could hold received requests without bound.
 */
export interface GrpcLimits {
  /** Streams open at once on one connection; one more is refused with REFUSED_STREAM. */
  maxConcurrentStreams: number;
  /** Megabytes one HTTP/2 session may buffer (frames, headers, queued writes) before it is closed. */
  maxSessionMemoryMb: number;
  /** A connection with no call open for this long is closed. */
  maxConnectionIdleMs: number;
  /** A connection is closed (after GOAWAY) at this age, so no one holds one for ever. */
  maxConnectionAgeMs: number;
  /**
   * Bytes of request messages arriving or received and not yet answered, across every call of
   * the contracts' services; health and reflection have as many of their own, of which one
   * address may hold a sixteenth (OPEN_CALLS_ADDRESSES), and at least one request of 64 KiB.
   */
  maxReceivedBytes: number;
}

/**
 * How many addresses it takes to fill the budget of health and reflection, which take calls
 * without a credential: one address holds at most this share of it, so it cannot keep the
 * others' health checks out. Each still has room for many of their requests of at most 64 KiB.
 */
export const OPEN_CALLS_ADDRESSES = 16;

export interface GrpcServer {
  /** Binds `host:port` (port 0: any free port); resolves with the bound port. */
  listen(host: string, port: number): Promise<number>;
  /** Stops taking calls; those in flight may finish within `graceMs`, then are cancelled. */
  close(graceMs: number): Promise<void>;
}

function fieldAt(request: GrpcRequest, path: string): string | undefined {
  let value: unknown = request;
  for (const part of path.split('.')) {
    value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[part] : undefined;
  }
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function deadlineOf(call: ServerUnaryCall<unknown, unknown>, defaultTimeoutMs: number, start: number): number {
  const given = call.getDeadline();
  const client = given instanceof Date ? given.getTime() : given;
  return Math.min(client, start + defaultTimeoutMs);
}

/**
 * The gRPC server: every service of the contracts through `handlers`, the standard health
 * service, and server reflection (both v1 and v1alpha). Each call is authenticated with the REST
 * surface's authenticator (`authorization: Bearer <key>` or `x-api-key`) from its metadata before
 * its message is read (authenticate-first.ts), authorized by scope,
 * its tenant resolved as over REST (`x-tenant-id` for administrators only), bounded by its
 * deadline (the default one when the client set none), logged with its `x-request-id`, and every
 * failure answered as an SVC error with `google.rpc.Status` details.
 */
export function createGrpcServer(options: GrpcServerOptions): GrpcServer {
  const { definition, logger } = options;
  const { limits } = options;
  const largeRequests = new Map<string, number>();
  for (const [service, handlers] of Object.entries(options.services)) {
    for (const [method, handler] of Object.entries(handlers)) {
      if (handler.largeRequest) largeRequests.set(`/${service}/${method}`, options.maxMessageBytes);
    }
  }
  const budget = { totalBytes: limits.maxReceivedBytes, maxMessageBytes: options.maxMessageBytes };
  const gate = authenticateFirst({
    ...options,
    receiveTimeoutMs: options.defaultTimeoutMs,
    requestBytes: createRequestBytes({ ...budget, limits: largeRequests }),
    openRequestBytes: createRequestBytes({
      ...budget,
      limits: new Map(),
      perAddressBytes: Math.max(limits.maxReceivedBytes / OPEN_CALLS_ADDRESSES, SMALL_REQUEST_BYTES),
    }),
  });
  const server = new Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_send_message_length': options.maxMessageBytes,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    'grpc-node.max_session_memory': limits.maxSessionMemoryMb,
    'grpc.max_connection_idle_ms': limits.maxConnectionIdleMs,
    'grpc.max_connection_age_ms': limits.maxConnectionAgeMs,
    // Calls in flight when a connection reaches its age may still finish within their deadline.
    'grpc.max_connection_age_grace_ms': options.defaultTimeoutMs,
    interceptors: [gate.interceptor],
  });

  const unary =
    (rpc: string, method: GrpcMethod) =>
    (call: ServerUnaryCall<GrpcRequest, object>, callback: sendUnaryData<object>): void => {
      const start = Date.now();
      const admission = gate.admissionOf(call.metadata);
      const requestId = admission?.requestId ?? '';
      const principalId = admission?.principal.id;
      const controller = new AbortController();
      const deadline = deadlineOf(call, options.defaultTimeoutMs, start);
      const expired = new Promise<never>((_resolve, reject) => {
        const timer = setTimeout(
          () => {
            controller.abort();
            reject(new SvcError('SVC-SYS-9010', `deadline exceeded after ${Date.now() - start} ms`));
          },
          Math.max(0, deadline - start),
        );
        controller.signal.addEventListener('abort', () => clearTimeout(timer));
      });
      expired.catch(() => undefined);
      call.on('cancelled', () => controller.abort());
      const work = (async () => {
        // Every call of the contracts' services passes the gate; one that did not is refused.
        if (admission === undefined) throw new SvcError('SVC-SYS-9003', 'call was not authenticated');
        const { principal } = admission;
        if (method.access === 'administrator') requireAdministrator(principal);
        else if (method.access !== 'authenticated') requireScope(principal, method.access);
        const tenant = await resolveTenant(
          principal,
          options.tenants,
          requestedTenant(
            firstValue(call.metadata, 'x-tenant-id'),
            method.tenantField === undefined ? undefined : fieldAt(call.request, method.tenantField),
            method.tenantField,
          ),
        );
        return method.handle(call.request, {
          caller: { principal, tenant, requestId },
          signal: controller.signal,
        });
      })();
      Promise.race([work, expired]).then(
        (response) => {
          controller.abort();
          logger.info({ request_id: requestId, rpc, code: 0, ms: Date.now() - start, principal: principalId }, 'rpc');
          callback(null, response);
        },
        (error: unknown) => {
          controller.abort();
          const line = { request_id: requestId, rpc, ms: Date.now() - start, principal: principalId };
          callback(failedCall(error, line, logger, options.documentationBase()));
        },
      );
    };

  const served: string[] = [];
  for (const [name, entry] of Object.entries(definition)) {
    if ('format' in entry) continue;
    served.push(name);
    if (!name.startsWith('svc.')) continue;
    const service = entry as ServiceDefinition;
    const handlers = options.services[name];
    if (handlers === undefined) throw new Error(`no handlers for gRPC service ${name}`);
    const implementation: UntypedServiceImplementation = {};
    for (const method of Object.keys(service)) {
      const handler = handlers[method];
      if (handler === undefined) throw new Error(`no handler for ${name}.${method}`);
      implementation[method] = unary(`/${name}/${method}`, handler);
    }
    server.addService(deferDecoding(service), implementation);
  }
  server.addService(
    definition['grpc.health.v1.Health'] as ServiceDefinition,
    healthService(options.health, logger, new Set(served)),
  );
  // Reflection reads only the `fileDescriptorProtos` of the definition's entries: one entry
  // carrying the compiled files makes it serve those instead of proto-loader's synthetic ones.
  const compiled = { files: { fileDescriptorProtos: options.fileDescriptors } } as unknown as PackageDefinition;
  new ReflectionService(compiled).addToServer(server);

  return {
    listen: (host, port) =>
      new Promise((resolve, reject) => {
        server.bindAsync(
          `${host.includes(':') ? `[${host}]` : host}:${port}`,
          ServerCredentials.createInsecure(),
          (error, bound) => (error === null ? resolve(bound) : reject(error)),
        );
      }),
    close: (graceMs) =>
      new Promise((resolve) => {
        const force = setTimeout(() => server.forceShutdown(), graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
