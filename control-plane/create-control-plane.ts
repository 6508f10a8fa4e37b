import { randomUUID } from 'node:crypto';
import type { LookupFunction } from 'node:net';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Messaging } from '../core/bus/bus.ts';
import type { Config } from '../core/config/schema.ts';
import { requiredSetting } from '../core/config/required.ts';
import { secretFileReader } from '../core/config/secret-file.ts';
import { SYSTEM_TENANT } from '../core/domain/index.ts';
import { ErrorPages, listeningBaseUrl } from '../core/errors/index.ts';
import { ActionHistory, judgesFromConfig } from '../core/brain/index.ts';
import { createTokenCounter } from '../core/metering/tokens.ts';
import { Approvals } from './approvals/approvals.ts';
import { Checkpoints } from './checkpoints/checkpoints.ts';
import { ExecutionContexts } from './checkpoints/execution-contexts.ts';
import { serveApprovalHolds } from './approvals/hold-responder.ts';
import { ApiKeys } from './auth/api-keys.ts';
import { CostPredictor } from './brain/cost-prediction.ts';
import { Oracle } from './brain/oracle.ts';
import { OverrunWatch } from './brain/overrun-watch.ts';
import { Authenticator } from './auth/authenticator.ts';
import { AUTH_FAILURE_COUNTS, createAuthFailureLimit } from './auth/auth-failure-limit.ts';
import { KeyAdministration } from './auth/key-administration.ts';
import { JwtVerifier } from './auth/jwt.ts';
import { AuditLog } from './audit/audit-log.ts';
import { Budgets } from './budgets/budgets.ts';
import { EffectDispatcher } from './effects/dispatcher.ts';
import { openPublicationOutbox } from './effects/publication-outbox.ts';
import { WebhookTargets } from './effects/webhook-targets.ts';
import { WebhookSender } from './effects/webhooks.ts';
import { Envelopes } from './envelopes/envelopes.ts';
import { JobRunner } from './jobs/job-runner.ts';
import { RetentionSweep } from './retention/retention-sweep.ts';
import { LeaseLedger } from './leases/lease-ledger.ts';
import { featuresFromConfig } from './features/features.ts';
import { TenantFeatures } from './features/tenant-features.ts';
import { EventProcessor } from './processor/event-processor.ts';
import { serveLeases } from './sync/lease-responder.ts';
import { StatePublisher } from './sync/state-publisher.ts';
import { ControlPlaneMetrics } from './observability/metrics.ts';
import { metricsAccess } from '../core/auth/metrics-token.ts';
import { mcpRoutes } from './mcp/http.ts';
import { createMcpSurface } from './mcp/server.ts';
import { Policies } from './policies/policies.ts';
import { MessageJson } from './gateway/message-json.ts';
import { transcodedRoutes } from './gateway/transcoder.ts';
import { loadServedDefinition, servedFileDescriptors } from './grpc/contracts.ts';
import { listHttpRules } from './grpc/http-rules.ts';
import { createGrpcServer } from './grpc/server.ts';
import { createRequestRate, REQUEST_COUNTS } from './auth/request-rate.ts';
import { minuteCounts, type Sharing } from './auth/shared-minute-counts.ts';
import { checkpointService } from './grpc/services/checkpoint-service.ts';
import { costService } from './grpc/services/cost-service.ts';
import { envelopeService } from './grpc/services/envelope-service.ts';
import { policyService } from './grpc/services/policy-service.ts';
import { tenantService } from './grpc/services/tenant-service.ts';
import { createApp, type RegisteredRoute } from './rest/app.ts';
import { apiKeyRoutes } from './rest/routes/api-keys.ts';
import { approvalRoutes } from './rest/routes/approvals.ts';
import { auditRoutes } from './rest/routes/audit.ts';
import { brainRoutes } from './rest/routes/brain.ts';
import { Detections } from './brain/detections.ts';
import { immuneSystemService, oracleService, semanticJudgeService } from './grpc/services/brain-services.ts';
import { budgetRoutes } from './rest/routes/budgets.ts';
import { envelopeRoutes } from './rest/routes/envelopes.ts';
import { errorDocsRoutes } from './rest/routes/error-docs.ts';
import { eventRoutes } from './rest/routes/events.ts';
import { startSystemReports } from '../core/observability/system-reports.ts';
import { checkHealth, operationalRoutes, type DependencyCheck } from './rest/routes/operational.ts';
import { guideConfigRoutes } from './rest/routes/guide-config.ts';
import { guidePolicyRoutes } from './rest/routes/guide-policies.ts';
import { guideTraceRoutes } from './rest/routes/guide-traces.ts';
import { policyRoutes } from './rest/routes/policies.ts';
import { tenantRoutes } from './rest/routes/tenants.ts';
import { openStorage } from './storage/open-storage.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type Storage } from './storage/storage.ts';
import { Tenants } from './tenants/tenants.ts';
import { Traces } from './traces/traces.ts';
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
  storage: Storage;
  services: {
    envelopes: Envelopes;
    budgets: Budgets;
    policies: Policies;
    approvals: Approvals;
    keys: ApiKeys;
    tenants: Tenants;
    audit: AuditLog;
    leases: LeaseLedger;
  };
  processor: EventProcessor;
  jobs: JobRunner;
  /** The Oracle's background job; tests run a round with `runOnce`. */
  overrunWatch: OverrunWatch;
  webhooks: WebhookSender;
  effects: EffectDispatcher;
  metrics: ControlPlaneMetrics;
  /**
   * Listens on the configured host: HTTP on http_port, gRPC on grpc_port. Resolves with the HTTP
   * address; `grpcPort()` gives the gRPC port bound.
   */
  listen(): Promise<string>;
  /** The bound gRPC port once listening. */
  grpcPort(): number | undefined;
  /** Every HTTP route the server registered (method and fastify path). */
  httpRoutes: readonly RegisteredRoute[];
  /**
   * The drain: stops taking requests (new ones are answered 503), stops pulling events (what a
   * consumer pulled and has not begun goes back to JetStream for the other replicas), lets what is
   * in flight finish within `shutdown_grace_ms` (connections still busy then are cut), gives up
   * its job leases, then closes the store.
   */
  close(): Promise<void>;
}

/** Wires the control plane's services and REST surface from its dependencies. */
export async function createControlPlane(deps: ControlPlaneDeps): Promise<ControlPlane> {
  const { config, logger, messaging } = deps;
  const clock = deps.clock ?? (() => new Date());
  const storage = await openStorage(config, logger);

  const metrics = deps.metrics ?? new ControlPlaneMetrics();
  const audit = new AuditLog(storage, clock);
  const tenants = new Tenants(storage);
  const keys = new ApiKeys(storage);
  const keyAdministration = new KeyAdministration({ keys, storage, audit, clock });
  const webhookSecrets = new WebhookSecrets(storage, clock, config.webhook_secret_grace_seconds * 1000);
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
    storage,
    bus: messaging.bus,
    registry: metrics.registry,
    logger: logger.child({ component: 'outbox' }),
  });
  const effects = new EffectDispatcher({
    storage,
    outbox,
    webhooks,
    log: logger.child({ component: 'effects' }),
    detected: (kind) => metrics.immuneDetections.inc({ kind }),
    refused: (claim) => metrics.foreignClaims.inc({ claim }),
  });
  const budgets = new Budgets({
    storage,
    audit,
    effects,
    clock,
    webhookUrlProblem: (url) => webhookTargets.problemWith(url),
  });
  const judges = judgesFromConfig(config, {
    registry: metrics.registry,
    processName: 'control plane',
    costUsd: (model, usage) => deps.pricer(model, usage).costMicros / 1_000_000,
  });
  const approvals = new Approvals({ storage, audit, effects, clock });
  const policies = new Policies({
    storage,
    audit,
    effects,
    approvals,
    judgeFor: (tenant) => judges.selector.forTenant(tenant),
    clock,
    history: new ActionHistory({
      windowMs: config.proxy_sequence_window_seconds * 1000,
      maxScopes: config.proxy_sequence_executions,
    }),
    builtin: judges.builtin,
    observe: (r) => metrics.observePolicy(r),
  });
  metrics.reportBudgetSpend(async () =>
    budgets.spendByBudget([SYSTEM_TENANT, ...(await tenants.list()).map((t) => t.tenant_id)]),
  );
  const envelopes = new Envelopes({ storage, audit, budgets, policies, effects, clock, pricer: deps.pricer });
  const leases = new LeaseLedger(storage, clock, config.lease_ttl_seconds * 1000);

  const publisher = new StatePublisher({
    messaging,
    policies,
    budgets,
    leases,
    tenants,
    envelopes: storage.read.envelopes,
    holdMaxAgeMs: config.hold_max_age_seconds * 1000,
    clock,
    logger: logger.child({ component: 'state-sync' }),
  });
  await publisher.start();
  effects.attach(publisher);
  const leaseService = await serveLeases({ messaging, leases, effects });
  const approvalHolds = await serveApprovalHolds({ messaging, approvals });
  const processor = new EventProcessor({
    audit,
    pricer: deps.pricer,
    messaging,
    effects,
    logger: logger.child({ component: 'event-processor' }),
    clock,
  });
  await processor.start({ batchSize: config.processor_batch_size, maxWaitMs: config.processor_max_wait_ms });
  const oracle = new Oracle({
    read: storage.read,
    budgets,
    envelopes,
    clock,
    lookbackPeriods: config.oracle_lookback_periods,
    maxEvents: config.oracle_max_events,
  });
  // On the token thread only, as the proxy's: in standalone mode this event loop serves its calls too.
  const tokens = createTokenCounter({ tokenizeOn: 'thread', logger: logger.child({ component: 'tokens' }) });
  const costs = new CostPredictor({
    read: storage.read,
    budgets,
    oracle,
    pricer: deps.pricer,
    tokens,
    clock,
    maxEvents: config.oracle_max_events,
  });
  const detections = new Detections(storage.read);
  const features = new TenantFeatures({ storage, audit, service: featuresFromConfig(config) });
  const overrunWatch = new OverrunWatch({
    tenants,
    budgets,
    oracle,
    effects,
    clock,
    logger: logger.child({ component: 'overrun-watch' }),
    threshold: config.oracle_overrun_threshold,
  });
  const retention = new RetentionSweep({
    storage,
    days: config.retention_days,
    batchSize: config.retention_batch_size,
    clock,
    onRemoved: (kind, count) => metrics.retentionRemoved.inc({ kind }, count),
    redeliverableForMs: () => messaging.bus.redeliverableForMs(),
    onDedupKept: (redeliverableForMs) =>
      logger.warn(
        { component: 'retention', stream_max_age_ms: redeliverableForMs, retention_days: config.retention_days },
        'retention keeps usage events and violation de-duplication records: the event stream keeps messages at least as long (lower its max_age below SVC_RETENTION_DAYS)',
      ),
  });
  const jobs = new JobRunner({
    storage,
    holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    leaseTtlMs: config.job_lease_ttl_seconds * 1000,
    clock,
    logger: logger.child({ component: 'jobs' }),
  });
  // Budget periods end and budgets expire without a write: the holder sends every state again.
  jobs.start([
    {
      name: 'state-refresh',
      intervalMs: config.state_refresh_seconds * 1000,
      run: (signal) => publisher.refresh(signal),
    },
    // Old usage events and de-duplication entries go, a small batch per transaction.
    ...(config.retention_days > 0
      ? [
          {
            name: 'retention',
            intervalMs: config.retention_interval_seconds * 1000,
            run: async (signal: AbortSignal) => {
              await retention.runOnce(signal);
            },
          },
        ]
      : []),
    // The Oracle looks at every active budget for a coming overrun.
    ...(config.oracle_interval_seconds > 0
      ? [
          {
            name: 'oracle.overrun-watch',
            intervalMs: config.oracle_interval_seconds * 1000,
            run: async (signal: AbortSignal) => {
              await overrunWatch.runOnce(signal);
            },
          },
        ]
      : []),
  ]);

  const jwt =
    config.jwt_jwks_url === undefined
      ? null
      : new JwtVerifier({
          jwksUrl: config.jwt_jwks_url,
          issuer: requiredSetting(config.jwt_issuer, 'SVC_JWT_ISSUER', 'control plane'),
          audience: requiredSetting(config.jwt_audience, 'SVC_JWT_AUDIENCE', 'control plane'),
          tenantClaim: config.jwt_tenant_claim,
          maxLifetimeSeconds: config.jwt_max_lifetime_seconds,
          tenantExists: (tenant) => tenants.exists(tenant),
          clock,
        });
  const now = () => clock().getTime();
  // In standalone mode this process is the only replica: there is no one to tell.
  const sharing: Sharing | undefined =
    config.nats_url === undefined
      ? undefined
      : {
          signals: messaging.signals,
          connected: () => messaging.healthy(),
          now,
          logger: logger.child({ component: 'shared-counts' }),
          lost: (subject, reason) => metrics.announcementsLost.inc({ subject, reason }),
        };
  const authFailureCounts = await minuteCounts(AUTH_FAILURE_COUNTS, sharing);
  const requestCounts = await minuteCounts(REQUEST_COUNTS, sharing);
  const authFailures = createAuthFailureLimit(config.auth_failures_per_minute, { now, counts: authFailureCounts });
  const authenticator = new Authenticator(keys, jwt, config.bootstrap_admin_key, clock, authFailures);
  let listeningAt: string | undefined;
  const documentationBase = () =>
    config.public_base_url ?? listeningAt ?? `http://${config.http_host}:${config.http_port}`;
  const requestRate = createRequestRate(config.rate_limit_per_minute, { now, counts: requestCounts });
  const { app, routes, registered } = await createApp({
    logger,
    authenticator,
    tenants,
    metrics,
    bodyLimitBytes: config.body_limit_bytes,
    requestTimeoutMs: config.http_request_timeout_ms,
    requestRate,
    documentationBase,
  });

  envelopeRoutes(routes, envelopes);
  budgetRoutes(routes, budgets, clock);
  policyRoutes(routes, policies);
  approvalRoutes(routes, approvals);
  brainRoutes(routes, { judges: judges.selector, oracle, costs, detections });
  apiKeyRoutes(routes, keyAdministration);
  tenantRoutes(routes, { tenants, webhookSecrets, storage, audit, effects, clock });
  auditRoutes(routes, audit);
  eventRoutes(routes, storage.read);
  const publicConfig = {
    version: config.version,
    rate_limit_per_minute: config.rate_limit_per_minute,
    body_limit_bytes: config.body_limit_bytes,
    page_size: { default: DEFAULT_PAGE_SIZE, max: MAX_PAGE_SIZE },
  };
  guidePolicyRoutes(routes, policies);
  guideTraceRoutes(routes, new Traces({ read: storage.read, envelopes }));
  guideConfigRoutes(routes, { read: storage.read, publicConfig, features });
  errorDocsRoutes(routes, deps.errorPages ?? ErrorPages.load());
  const grpcServices = {
    'svc.envelope.v1.EnvelopeService': envelopeService(envelopes),
    'svc.policy.v1.PolicyService': policyService(policies, approvals, clock),
    'svc.cost.v1.CostService': costService({
      budgets,
      envelopes,
      read: storage.read,
      costs,
      clock,
    }),
    'svc.checkpoint.v1.CheckpointService': checkpointService(
      new Checkpoints({
        storage,
        audit,
        effects,
        clock,
        limits: {
          maxVersions: config.checkpoint_max_versions,
          executionsPerTenant: config.checkpoint_executions_per_tenant,
        },
      }),
      new ExecutionContexts({ storage, audit, effects, clock, perTenant: config.execution_contexts_per_tenant }),
    ),
    'svc.tenant.v1.TenantService': tenantService(keyAdministration),
    'svc.brain.v1.SemanticJudgeService': semanticJudgeService(judges.selector),
    'svc.brain.v1.OracleService': oracleService(oracle),
    'svc.brain.v1.ImmuneSystemService': immuneSystemService(detections),
  };
  const servedDefinition = loadServedDefinition();
  // After every REST route: a binding REST already serves keeps its route.
  transcodedRoutes(routes, {
    definition: servedDefinition,
    rules: listHttpRules(servedDefinition),
    services: grpcServices,
    json: new MessageJson(servedDefinition),
    tenants,
  });
  const health: Record<string, DependencyCheck> = {
    database: () => storage.health(),
    event_bus: () =>
      Promise.resolve(messaging.healthy() ? { status: 'ok' } : { status: 'down', detail: 'not connected' }),
    cache: () => Promise.resolve(publisher.health()),
  };
  const grpc = createGrpcServer({
    definition: servedDefinition,
    fileDescriptors: servedFileDescriptors(),
    services: grpcServices,
    authenticator,
    requestRate,
    tenants,
    logger: logger.child({ component: 'grpc' }),
    documentationBase,
    health: async () =>
      (await Promise.all(Object.values(health).map((check) => check()))).every((c) => c.status === 'ok'),
    maxMessageBytes: config.grpc_max_message_bytes,
    defaultTimeoutMs: config.grpc_default_timeout_ms,
    limits: {
      maxConcurrentStreams: config.grpc_max_concurrent_streams,
      maxSessionMemoryMb: config.grpc_max_session_memory_mb,
      maxConnectionIdleMs: config.grpc_max_connection_idle_ms,
      maxConnectionAgeMs: config.grpc_max_connection_age_ms,
      maxReceivedBytes: config.grpc_max_received_bytes,
    },
  });
  let grpcPort: number | undefined;
  await mcpRoutes(app, {
    surface: createMcpSurface({
      policies,
      budgets,
      approvals,
      keys: keyAdministration,
      audit,
      tenants,
      read: storage.read,
      clock,
      publicConfig,
    }),
    authenticator,
    tenants,
    version: config.version,
    documentationBase,
    log: logger.child({ component: 'mcp' }),
    metrics,
    requestRate,
  });
  let stopReports = (): void => undefined;
  operationalRoutes(routes, {
    version: config.version,
    schemaVersion: () => storage.schemaVersion(),
    metrics,
    metricsAccess: metricsAccess(secretFileReader(config.metrics_token_file)),
    outboxDepth: () => outbox.depth(),
    checks: health,
  });

  return {
    app,
    storage,
    services: { envelopes, budgets, policies, approvals, keys, tenants, audit, leases },
    processor,
    jobs,
    overrunWatch,
    webhooks,
    effects,
    metrics,
    async listen() {
      const address = await app.listen({ host: config.http_host, port: config.http_port });
      stopReports = startSystemReports({
        signals: messaging.signals,
        service: 'control-plane',
        intervalMs: config.system_report_interval_ms,
        health: () => checkHealth(health),
        registry: metrics.registry,
        clock,
        logger,
      });
      listeningAt = listeningBaseUrl(app.server.address());
      grpcPort = await grpc.listen(config.http_host, config.grpc_port);
      return address;
    },
    grpcPort: () => grpcPort,
    httpRoutes: registered,
    async close() {
      stopReports();
      const cut = setTimeout(() => app.server.closeAllConnections(), config.shutdown_grace_ms);
      try {
        await Promise.all([
          grpc.close(config.shutdown_grace_ms),
          app.close(),
          processor.stop(),
          leaseService.unsubscribe(),
          approvalHolds.unsubscribe(),
          jobs.stop(),
        ]);
      } finally {
        clearTimeout(cut);
      }
      await Promise.all([authFailureCounts.stop(), requestCounts.stop()]);
      await publisher.stop();
      // A moment to send what is pending; what is left stays in the store for the next start.
      if (messaging.healthy()) await outbox.flush(2_000).catch(() => undefined);
      await outbox.close();
      await webhooks.close();
      await storage.close();
      tokens.free();
    },
  };
}
