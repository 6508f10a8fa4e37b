import { mkdirSync } from 'node:fs';
import type { LookupFunction } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Messaging } from '../core/bus/bus.ts';
import type { Config } from '../core/config/schema.ts';
import { SYSTEM_TENANT } from '../core/domain/index.ts';
import { ErrorPages, listeningBaseUrl } from '../core/errors/index.ts';
import { builtinJudgeOptions, createBuiltinJudge } from '../core/brain/index.ts';
import { ApiKeys } from './auth/api-keys.ts';
import { Authenticator } from './auth/authenticator.ts';
import { JwtVerifier } from './auth/jwt.ts';
import { AuditLog } from './audit/audit-log.ts';
import { Budgets } from './budgets/budgets.ts';
import { EffectDispatcher } from './effects/dispatcher.ts';
import { openPublicationOutbox } from './effects/publication-outbox.ts';
import { WebhookTargets } from './effects/webhook-targets.ts';
import { WebhookSender } from './effects/webhooks.ts';
import { Envelopes } from './envelopes/envelopes.ts';
import { LeaseLedger } from './leases/lease-ledger.ts';
import { EventProcessor } from './processor/event-processor.ts';
import { serveLeases } from './sync/lease-responder.ts';
import { StatePublisher } from './sync/state-publisher.ts';
import { ControlPlaneMetrics } from './observability/metrics.ts';
import { Policies } from './policies/policies.ts';
import { createApp } from './rest/app.ts';
import { apiKeyRoutes } from './rest/routes/api-keys.ts';
import { auditRoutes } from './rest/routes/audit.ts';
import { brainRoutes } from './rest/routes/brain.ts';
import { budgetRoutes } from './rest/routes/budgets.ts';
import { envelopeRoutes } from './rest/routes/envelopes.ts';
import { errorDocsRoutes } from './rest/routes/error-docs.ts';
import { eventRoutes } from './rest/routes/events.ts';
import { operationalRoutes } from './rest/routes/operational.ts';
import { policyRoutes } from './rest/routes/policies.ts';
import { tenantRoutes } from './rest/routes/tenants.ts';
import { migrate, schemaVersion } from './store/migrations.ts';
import { Store } from './store/store.ts';
import { Tenants } from './tenants/tenants.ts';
import { WebhookSecrets } from './tenants/webhook-secrets.ts';
import type { Pricer } from './usage/pricer.ts';

export interface ControlPlaneDeps {
  config: Config;
  logger: Logger;
  messaging: Messaging;
  pricer: Pricer;
  /** Made before the messaging when the bus should register its metrics in the same registry. */
  metrics?: ControlPlaneMetrics;
  clock?: () => Date;
  /** The pages of `/docs/errors/{code}`; docs/errors.md beside the code when absent. */
  errorPages?: ErrorPages;
  /** Name resolution for webhook deliveries; the system resolver when absent. */
  resolve?: LookupFunction;
}

export interface ControlPlane {
  app: FastifyInstance;
  store: Store;
  services: {
    envelopes: Envelopes;
    budgets: Budgets;
    policies: Policies;
    keys: ApiKeys;
    tenants: Tenants;
    audit: AuditLog;
    leases: LeaseLedger;
  };
  processor: EventProcessor;
  webhooks: WebhookSender;
  effects: EffectDispatcher;
  metrics: ControlPlaneMetrics;
  /** Listens on the configured host and port; resolves with the bound address. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

/** Wires the control plane's services and REST surface from its dependencies. */
export async function createControlPlane(deps: ControlPlaneDeps): Promise<ControlPlane> {
  const { config, logger, messaging } = deps;
  const clock = deps.clock ?? (() => new Date());
  mkdirSync(config.data_dir, { recursive: true });
  const store = new Store(`${config.data_dir}/control-plane`, (error) =>
    logger.error({ err: error }, 'storage write failed'),
  );
  const applied = migrate(store);
  if (applied.length > 0) logger.info({ applied, schema_version: schemaVersion(store) }, 'storage migrated');

  const metrics = deps.metrics ?? new ControlPlaneMetrics();
  const audit = new AuditLog(store, clock);
  const tenants = new Tenants(store);
  const keys = new ApiKeys(store);
  const webhookSecrets = new WebhookSecrets(store, clock, config.webhook_secret_grace_seconds * 1000);
  const webhookTargets = new WebhookTargets({
    allowHttp: config.webhook_allow_http,
    allowedHosts: config.webhook_allowed_hosts,
    ...(deps.resolve !== undefined ? { resolve: deps.resolve } : {}),
  });
  const webhooks = new WebhookSender(
    {
      secrets: (tenant) => webhookSecrets.signingSecrets(tenant),
      targets: webhookTargets,
      maxAttempts: config.webhook_max_attempts,
      timeoutMs: config.webhook_timeout_ms,
    },
    logger.child({ component: 'webhooks' }),
  );
  const outbox = openPublicationOutbox({
    store,
    bus: messaging.bus,
    registry: metrics.registry,
    logger: logger.child({ component: 'outbox' }),
  });
  const effects = new EffectDispatcher({ store, outbox, webhooks, log: logger.child({ component: 'effects' }) });
  const budgets = new Budgets({
    store,
    audit,
    effects,
    clock,
    webhookUrlProblem: (url) => webhookTargets.problemWith(url),
  });
  const judge = createBuiltinJudge(builtinJudgeOptions(config));
  const policies = new Policies({
    store,
    audit,
    effects,
    judge,
    clock,
    observe: (r) => metrics.observePolicy(r),
  });
  metrics.reportBudgetSpend(() => budgets.spendByBudget([SYSTEM_TENANT, ...tenants.list().map((t) => t.tenant_id)]));
  const envelopes = new Envelopes({ store, audit, budgets, policies, effects, clock, pricer: deps.pricer });
  const leases = new LeaseLedger(store, budgets, clock, config.lease_ttl_seconds * 1000);

  const publisher = new StatePublisher({
    messaging,
    policies,
    budgets,
    leases,
    tenants,
    clock,
    logger: logger.child({ component: 'state-sync' }),
  });
  await publisher.start();
  effects.attach(publisher);
  const leaseService = await serveLeases({ messaging, store, leases, effects });
  const processor = new EventProcessor({
    store,
    audit,
    pricer: deps.pricer,
    messaging,
    effects,
    logger: logger.child({ component: 'event-processor' }),
    clock,
  });
  await processor.start({ batchSize: config.processor_batch_size, maxWaitMs: config.processor_max_wait_ms });

  const jwt =
    config.jwt_jwks_url === undefined
      ? null
      : new JwtVerifier({
          jwksUrl: config.jwt_jwks_url,
          issuer: config.jwt_issuer,
          audience: config.jwt_audience,
          tenantClaim: config.jwt_tenant_claim,
        });
  const authenticator = new Authenticator(keys, jwt, config.bootstrap_admin_key, clock);
  let listeningAt: string | undefined;
  const documentationBase = () =>
    config.public_base_url ?? listeningAt ?? `http://${config.http_host}:${config.http_port}`;
  const { app, routes } = await createApp({
    logger,
    authenticator,
    tenants,
    metrics,
    bodyLimitBytes: config.body_limit_bytes,
    rateLimitPerMinute: config.rate_limit_per_minute,
    documentationBase,
  });

  envelopeRoutes(routes, envelopes);
  budgetRoutes(routes, budgets, clock);
  policyRoutes(routes, policies);
  brainRoutes(routes, judge);
  apiKeyRoutes(routes, { keys, store, audit, clock });
  tenantRoutes(routes, { tenants, webhookSecrets, store, audit, effects, clock });
  auditRoutes(routes, audit);
  eventRoutes(routes, store);
  errorDocsRoutes(routes, deps.errorPages ?? ErrorPages.load());
  operationalRoutes(routes, {
    version: config.version,
    schemaVersion: () => schemaVersion(store),
    metrics,
    outboxDepth: () => outbox.depth(),
    checks: {
      database: () => {
        try {
          schemaVersion(store);
          return { status: 'ok' };
        } catch (error) {
          // /health is public: the cause goes to the log, not to whoever asks.
          logger.error({ err: error }, 'storage check failed');
          return { status: 'down', detail: 'storage not readable' };
        }
      },
      event_bus: () => (messaging.healthy() ? { status: 'ok' } : { status: 'down', detail: 'not connected' }),
    },
  });

  return {
    app,
    store,
    services: { envelopes, budgets, policies, keys, tenants, audit, leases },
    processor,
    webhooks,
    effects,
    metrics,
    async listen() {
      const address = await app.listen({ host: config.http_host, port: config.http_port });
      listeningAt = listeningBaseUrl(app.server.address());
      return address;
    },
    async close() {
      await app.close();
      await processor.stop();
      await leaseService.unsubscribe();
      await publisher.stop();
      // A moment to send what is pending; what is left stays in the store for the next start.
      if (messaging.healthy()) await outbox.flush(2_000).catch(() => undefined);
      await outbox.close();
      await webhooks.close();
      await store.close();
    },
  };
}
