import { z } from 'zod';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import type { ControlPlaneMetrics } from '../../observability/metrics.ts';
import { openApiDocument } from '../openapi.ts';
import type { RouteTable } from '../route.ts';

export type DependencyCheck = () => Promise<{ status: 'ok' | 'down'; detail?: string }>;

const DependencySchema = z.object({ status: z.enum(['ok', 'down']), detail: z.string().optional() });
const HealthSchema = z.object({
  /** `down` while the store is unreachable (503), `degraded` while another dependency is. */
  status: z.enum(['ok', 'degraded', 'down']),
  service: z.string(),
  version: z.string(),
  services: z.record(z.string(), DependencySchema),
  /**
   * Bus publications committed but not yet acknowledged by NATS (they go out once it is back);
   * null while the store cannot be read.
   */
  outbox: z.object({ depth: z.number().int().nonnegative().nullable() }),
});
const VersionSchema = z.object({
  service: z.string(),
  version: z.string(),
  api_version: z.string(),
  schema_version: z.number().int(),
});

/**
 * The control plane's status from its dependency checks: `down` without its store (it can answer
 * nothing), `degraded` while another dependency is away (without NATS it still serves: the outbox
 * keeps what it publishes), else `ok`. Served by GET /health and published on svc.system.health.
 */
export async function checkHealth(checks: Record<string, DependencyCheck>) {
  const checked = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => [name, await check()] as const),
  );
  const services = Object.fromEntries(checked);
  const ok = checked.every(([, s]) => s.status === 'ok');
  const down = services.database?.status === 'down';
  return { status: ok ? ('ok' as const) : down ? ('down' as const) : ('degraded' as const), services };
}

export function operationalRoutes(
  routes: RouteTable,
  deps: {
    version: string;
    schemaVersion: () => Promise<number>;
    checks: Record<string, DependencyCheck>;
    metrics: ControlPlaneMetrics;
    /** Whether a scrape's Authorization header lets it read the per-tenant series; throws for a wrong one. */
    metricsAccess: (authorization: string | undefined) => boolean;
    outboxDepth: () => Promise<number>;
  },
): void {
  const health = async () => {
    const { status, services } = await checkHealth(deps.checks);
    const down = status === 'down';
    return {
      ok: status === 'ok',
      down,
      body: {
        status,
        service: 'control-plane',
        version: deps.version,
        services,
        outbox: { depth: down ? null : await deps.outboxDepth().catch(() => null) },
      },
    };
  };
  routes.add({
    method: 'GET',
    path: '/health',
    operationId: 'health',
    tag: 'operations',
    access: 'public',
    summary: 'Status with per-dependency detail; 503 while the store is unreachable',
    responses: {
      200: { description: 'status', schema: HealthSchema },
      503: { description: 'the store is unreachable', schema: HealthSchema },
    },
    handler: async () => {
      const { down, body } = await health();
      return { status: down ? 503 : 200, body };
    },
  });
  routes.add({
    method: 'GET',
    path: '/health/live',
    operationId: 'live',
    tag: 'operations',
    access: 'public',
    summary: 'Liveness',
    responses: { 200: { description: 'alive' } },
    handler: () => ({ status: 200, body: { status: 'ok' } }),
  });
  routes.add({
    method: 'GET',
    path: '/health/ready',
    operationId: 'ready',
    tag: 'operations',
    access: 'public',
    summary: 'Readiness: 200 when every dependency is connected',
    responses: {
      200: { description: 'ready', schema: HealthSchema },
      503: { description: 'not ready', schema: HealthSchema },
    },
    handler: async () => {
      const { ok, body } = await health();
      return { status: ok ? 200 : 503, body };
    },
  });
  routes.add({
    method: 'GET',
    path: '/metrics',
    operationId: 'metrics',
    tag: 'operations',
    access: 'public',
    summary: 'Prometheus metrics; the per-tenant budget series only with the metrics token',
    responses: {
      200: { description: 'Prometheus text format', contentType: 'text/plain', schema: z.string() },
      401: { description: 'an Authorization header without the metrics token (SVC-SYS-9003)', schema: ErrorBodySchema },
    },
    handler: async ({ request }) => ({
      status: 200,
      body: await deps.metrics.render(deps.metricsAccess(request.headers.authorization)),
      contentType: deps.metrics.registry.contentType,
    }),
  });
  routes.add({
    method: 'GET',
    path: '/version',
    operationId: 'version',
    tag: 'operations',
    access: 'public',
    summary: 'Service, API and storage schema versions',
    responses: { 200: { description: 'versions', schema: VersionSchema } },
    handler: async () => ({
      status: 200,
      body: {
        service: 'control-plane',
        version: deps.version,
        api_version: 'v1',
        schema_version: await deps.schemaVersion(),
      },
    }),
  });
  let document: unknown;
  routes.add({
    method: 'GET',
    path: '/openapi.json',
    operationId: 'openapi',
    tag: 'operations',
    access: 'public',
    summary: 'This OpenAPI 3.1 document',
    responses: { 200: { description: 'OpenAPI document' } },
    handler: () => {
      document ??= openApiDocument(routes, deps.version);
      return { status: 200, body: document };
    },
  });
}
