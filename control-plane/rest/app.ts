import rateLimit from '@fastify/rate-limit';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Logger } from 'pino';
import { MAX_PATH_ID_LENGTH } from '../../core/domain/index.ts';
import { isSvcError, SvcError, type DocumentationBase } from '../../core/errors/index.ts';
import { drainOversizedBody } from '../../core/http/oversized-body.ts';
import type { Authenticator } from '../auth/authenticator.ts';
import { RATE_WINDOW_MS, rateExceeded, rateKey, type RequestRate } from '../auth/request-rate.ts';
import type { ControlPlaneMetrics } from '../observability/metrics.ts';
import { requestIdOf } from '../observability/request-id.ts';
import type { Tenants } from '../tenants/tenants.ts';
import { bodyDeadline } from './body-deadline.ts';
import { declaredOverLimit } from './oversized-body.ts';
import { asSvcError, renderError } from './render-error.ts';
import { createRouteTable, type RouteTable } from './route.ts';

export interface AppOptions {
  logger: Logger;
  authenticator: Authenticator;
  tenants: Tenants;
  metrics: ControlPlaneMetrics;
  bodyLimitBytes: number;
  /** How long a request may take to arrive, headers and body (408 and closed after). */
  requestTimeoutMs: number;
  /** Shared with the gRPC surface: a caller has one limit whichever way it calls. */
  requestRate: RequestRate;
  /** Base of the `documentation_url` of error bodies. */
  documentationBase: DocumentationBase;
}

/**
 * The HTTP server of the control plane. Requests carry `x-request-id` (taken from the caller or
 * generated) into every log line and error body; every failure is rendered as an SVC error.
 */
/** A route as the HTTP server registered it, whichever way it was added. */
export interface RegisteredRoute {
  method: string;
  /** Fastify form: `/v1/envelopes/:envelope_id`. */
  url: string;
}

export async function createApp(
  options: AppOptions,
): Promise<{ app: FastifyInstance; routes: RouteTable; registered: readonly RegisteredRoute[] }> {
  const loggerInstance: FastifyBaseLogger = options.logger;
  const sendError = (error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const svc = asSvcError(error);
    // What the caller is not told is logged under its request id.
    if (svc.code === 'SVC-SYS-9007') request.log.error({ err: error }, 'request failed');
    else if (!isSvcError(error)) request.log.info({ err: error, code: svc.code }, 'request refused');
    const rendered = renderError(svc, request.id, new Date(), options.documentationBase());
    return reply.code(rendered.status).headers(rendered.headers).send(rendered.body);
  };
  const app = Fastify({
    loggerInstance,
    requestIdHeader: false,
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    genReqId: (raw) => requestIdOf(raw.headers['x-request-id']),
    bodyLimit: options.bodyLimitBytes,
    // Headers that come slowly: Node answers 408, looking for them every second, not every 30 s.
    requestTimeout: options.requestTimeoutMs,
    http: { connectionsCheckingInterval: Math.min(1000, options.requestTimeoutMs / 2) },
    routerOptions: { maxParamLength: MAX_PATH_ID_LENGTH },
    // The router's own refusals (a malformed or over-long path segment) are SVC errors too.
    frameworkErrors: (error, request, reply) => {
      void sendError(error, request, reply);
    },
  });

  // Every route the server serves, so that a test can hold the OpenAPI document to all of them.
  const registered: RegisteredRoute[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) registered.push({ method, url: route.url });
  });

  app.setErrorHandler(sendError);
  app.setNotFoundHandler((request, reply) => {
    const rendered = renderError(
      new SvcError('SVC-SYS-9006', `no route ${request.method} ${request.url.split('?')[0]}`),
      request.id,
      new Date(),
      options.documentationBase(),
    );
    return reply.code(rendered.status).headers(rendered.headers).send(rendered.body);
  });

  // An empty body is an absent body whatever its content-type: optional bodies (TerminateRequest,
  // BudgetCheckRequest) are often sent as `Content-Type: application/json` with nothing after it.
  // Routes that need a body still refuse its absence, naming it.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') {
      done(null, undefined);
      return;
    }
    void parseJson(request, body as string, done);
  });

  app.addHook('onRequest', (request, _reply, done) => {
    bodyDeadline(request.raw, options.requestTimeoutMs);
    done();
  });
  app.addHook('onRequest', async (request, reply) => {
    if (!declaredOverLimit(request.raw, options.bodyLimitBytes)) return;
    const drained = await drainOversizedBody(
      request.raw,
      options.bodyLimitBytes,
      request.raw.headers['content-length'],
    );
    if (!drained) void reply.header('connection', 'close');
    throw new SvcError('SVC-SYS-9009', `request body too large: the limit is ${options.bodyLimitBytes} bytes`);
  });
  // Hooks with a callback, not async: fastify then makes no promise per hook and request.
  app.addHook('onSend', (request, reply, payload, done) => {
    void reply.header('x-request-id', request.id);
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    options.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    options.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    request.log.info(
      {
        method: request.method,
        route,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
        principal: request.principal?.id,
      },
      'request',
    );
    done();
  });

  await app.register(rateLimit, {
    global: true,
    hook: 'preHandler',
    max: options.requestRate.perMinute,
    timeWindow: RATE_WINDOW_MS,
    store: options.requestRate.store,
    keyGenerator: (request: FastifyRequest) =>
      request.principal === undefined ? request.ip : rateKey(request.principal),
    errorResponseBuilder: (_request, context) => rateExceeded(context.max, context.ttl),
  });

  const authenticate = async (request: FastifyRequest): Promise<void> => {
    request.principal = await options.authenticator.authenticate(request.headers, request.ip);
  };
  const routes = createRouteTable(app, { tenants: options.tenants, authenticate });
  return { app, routes, registered };
}
