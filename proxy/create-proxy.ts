import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import type { Messaging, Subscription } from '../core/bus/bus.ts';
import { metricsAccess } from '../core/auth/metrics-token.ts';
import type { Config } from '../core/config/schema.ts';
import { secretFileReader } from '../core/config/secret-file.ts';
import { ErrorPages, listeningBaseUrl, SvcError } from '../core/errors/index.ts';
import { cost, type PriceTable } from '../core/metering/prices.ts';
import { createTokenCounter } from '../core/metering/tokens.ts';
import { AdminServer, createProxyNetMetrics, type Readiness } from './admin/index.ts';
import { ApprovalHolds } from './approvals/index.ts';
import { HeldBytes, keptSidecarState, PauseHolds } from './holds/index.ts';
import { AddressPolicy, createEgressCheck, EgressGuard, parsePorts, type Resolve } from './egress/index.ts';
import { createControlPlaneCircuit, LeaseBook, PICO_PER_MICRO } from './enforcement/index.ts';
import { EnvelopeRegistry } from './envelopes/index.ts';
import { ActionHistory, judgesFromConfig } from '../core/brain/index.ts';
import {
  AnomalyWatch,
  createGovernedHandler,
  EventRecorder,
  movedPauseRecord,
  PolicyGate,
  type GovernanceDeps,
} from './governance/index.ts';
import { compileInterceptList, DEFAULT_REVERSE_ROUTES, ProxyListener } from './listener/index.ts';
import { parseMcpServers } from './mcp/index.ts';
import {
  createApprovalMetrics,
  createGovernanceMetrics,
  createPauseMetrics,
  createRulesetMetrics,
  createSidecarStateMetric,
} from './metrics/index.ts';
import { LmdbOutboxStorage } from '../core/outbox/lmdb-outbox-storage.ts';
import { Outbox } from '../core/outbox/outbox.ts';
import { createAdapterDeps, createDefaultAdapters, createProviderRegistry } from './providers/index.ts';
import { startSystemReports } from '../core/observability/system-reports.ts';
import { isFinal } from '../core/domain/envelope.ts';
import {
  BudgetWorkflows,
  HoldStates,
  listenForTerminations,
  RulesetSource,
  watchBudgetStates,
  watchHoldStates,
} from './sync/index.ts';
import { IdleGc } from './idle-gc/index.ts';
import { openProxyStore, ProvisionalEvents } from './store/index.ts';
import { LeafCertificateCache, loadOrCreateCa } from './tls/index.ts';
import {
  keySourcesFromConfig,
  parseUpstreamOverrides,
  ProviderCredentials,
  UpstreamClient,
  upstreamTrust,
} from './upstream/index.ts';

/** Who this sidecar governs: fixed per pod (SVC_TENANT_ID, SVC_API_KEY, SVC_BUDGET_ID). */
export interface ProxyBootstrap {
  tenantId: string;
  apiKey: string;
  budgetId: string;
}

export interface ProxyDeps {
  config: Config;
  logger: Logger;
  messaging: Messaging;
  prices: PriceTable;
  bootstrap: ProxyBootstrap;
  /** Metrics registry served on the admin port; a new one when absent. */
  registry?: Registry;
  /** Name resolution for every connection the proxy dials; the system resolver when absent. */
  resolve?: Resolve;
  /** The pages of `/docs/errors/{code}` on the admin port; docs/errors.md beside the code when absent. */
  errorPages?: ErrorPages;
  /** V8's collector (`globalThis.gc` under --expose-gc), for the collection once idle; none when absent. */
  gc?: NodeJS.GCFunction;
}

export interface ProxyAddresses {
  proxyPort: number;
  adminPort: number;
  proxyUrl: string;
}

export interface Proxy {
  /** The CA agents must trust for intercepted hosts. */
  readonly caCertFile: string;
  readonly caCertPem: string;
  /** True when this start generated the CA (standalone first start). */
  readonly caGenerated: boolean;
  readonly registry: Registry;
  readonly podExecutionId: string;
  readonly outbox: Outbox;
  readonly rulesets: RulesetSource;
  readonly leases: LeaseBook;
  readonly envelopes: EnvelopeRegistry;
  /** The tenant's paused and ended envelopes, from the `svc_holds` bucket. */
  readonly holds: HoldStates;
  readiness(): Readiness;
  /** Re-reads provider key files (wired to SIGHUP by the entry points). */
  reloadCredentials(): Promise<void>;
  /**
   * Starts the sync watch, the default budget's lease, the terminate and approval-decision
   * listeners and both ports.
   */
  listen(): Promise<ProxyAddresses>;
  /**
   * Refuses the calls held for approval, stops taking traffic, returns leases, hands the worst
   * cases standing for answers still being drained to the outbox, and closes the outbox (pending
   * events stay on disk).
   */
  close(): Promise<void>;
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '');
}

/** `host:port` of a URL, the scheme's default port written out. */
function hostPort(url: URL): string {
  return `${url.hostname}:${url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : url.port}`;
}

/** The proxy URL an agent on this machine uses, for a listener bound to `host`. */
function localUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/** Builds the sidecar from its dependencies; nothing listens until `listen()`. */
export async function createProxy(deps: ProxyDeps): Promise<Proxy> {
  const { config, logger, messaging, prices, bootstrap } = deps;
  const { tenantId } = bootstrap;
  const generatedDir = join(config.data_dir, 'proxy-ca');
  if ((config.ca_cert_file === undefined) !== (config.ca_key_file === undefined)) {
    const missing = config.ca_cert_file === undefined ? 'SVC_CA_CERT_FILE' : 'SVC_CA_KEY_FILE';
    throw new SvcError('SVC-SYS-9002', `invalid configuration: ${missing}: set both CA files or neither`, {}, [
      { field: missing, description: 'set both CA files or neither' },
    ]);
  }
  // Standalone generates a missing CA where it is configured to live; a cluster mounts it.
  const ca = await loadOrCreateCa({
    certFile: config.ca_cert_file ?? join(generatedDir, 'ca.pem'),
    keyFile: config.ca_key_file ?? join(generatedDir, 'ca-key.pem'),
    allowGenerate: config.mode === 'standalone',
  });
  const leafCertificates = await LeafCertificateCache.create({ caCertPem: ca.certPem, caKeyPem: ca.keyPem });

  const registry = deps.registry ?? new Registry();
  const netMetrics = createProxyNetMetrics(registry);
  const listedModels = new Set(prices.keys);
  const metrics = createGovernanceMetrics(registry, config.proxy_model_label_cap, (model) => listedModels.has(model));
  // Tokenized on the token thread only: the first exact count loads tiktoken there, never on the
  // loop every call shares (docs/performance.md, "Exact counts off the event loop").
  const tokens = createTokenCounter({ tokenizeOn: 'thread', logger: logger.child({ component: 'tokens' }) });
  const compatibleHosts = list(config.proxy_compatible_hosts);
  const providers = createProviderRegistry(
    createDefaultAdapters(
      createAdapterDeps(tokens, prices, {
        maxEventBytes: config.proxy_stream_event_limit_bytes,
        judgedTextChars: config.semantic_judge_max_text_chars,
        serverContextTokens: config.proxy_server_context_tokens,
      }),
      {
        compatibleHosts,
        compatibleBasePaths: config.proxy_compatible_base_paths.split(','),
      },
    ),
  );
  const mcp = parseMcpServers(config.proxy_mcp_servers);
  // host:port: a provider host on its TLS port, an MCP server on the port of its URL.
  const interceptList = compileInterceptList({
    built_in: providers.adapters.filter((a) => a.id !== 'openai-compatible').flatMap((a) => a.hosts),
    proxy_compatible_hosts: compatibleHosts,
    proxy_mcp_servers: mcp.servers.map((s) => hostPort(s.url)),
    proxy_intercept_hosts: list(config.proxy_intercept_hosts),
  });
  const guard = new EgressGuard({
    policy: new AddressPolicy({
      private: config.proxy_egress_private,
      denyCidrs: list(config.proxy_egress_deny_cidrs),
      allowCidrs: list(config.proxy_egress_allow_cidrs),
    }),
    ...(deps.resolve !== undefined ? { resolve: deps.resolve } : {}),
    onRefused: () => netMetrics.egressRefusals.inc({ reason: 'address' }),
  });
  const credentials = await ProviderCredentials.load({
    sources: keySourcesFromConfig(config),
    providerOf: (url) => providers.forHost(url.host)?.id,
    logger: logger.child({ component: 'credentials' }),
  });
  const upstream = new UpstreamClient({
    overrides: parseUpstreamOverrides(config.upstream_overrides),
    ...(config.upstream_ca_file !== undefined ? { ca: await upstreamTrust(config.upstream_ca_file) } : {}),
    metrics: netMetrics,
    guard,
    credentials,
  });

  // The LLM judge's settings are checked here, before anything is opened.
  const judges = judgesFromConfig(config, {
    registry,
    processName: 'proxy',
    costUsd: (model, usage) => cost(prices, model, { ...usage, cachedInput: 0 }).costUsd,
  });
  // Opened once the configuration has been read whole, so a bad value leaves no store open.
  const store = openProxyStore(config.data_dir, config.proxy_fsync_interval_ms);
  const rulesets = new RulesetSource({
    tenantId,
    keyValue: messaging.keyValue,
    store: store.root,
    logger: logger.child({ component: 'ruleset' }),
    metrics: createRulesetMetrics(registry),
  });
  const chosen = judges.selector.modeOf(tenantId) === 'builtin' ? undefined : judges.selector.forTenant(tenantId);
  const source = `proxy:${hostname()}`;
  const heldBytes = new HeldBytes(config.proxy_held_max_bytes);
  const approvals = new ApprovalHolds(
    {
      tenantId,
      requestedBy: { type: 'proxy', id: source },
      timeoutMs: config.proxy_approval_timeout_seconds * 1000,
      maxHeld: config.proxy_approval_max_held,
      opensPerMinute: config.proxy_approval_opens_per_minute,
      recheckMs: config.proxy_approval_recheck_ms,
    },
    messaging,
    createApprovalMetrics(registry),
    logger.child({ component: 'approvals' }),
    heldBytes,
  );
  const gate = new PolicyGate(rulesets, config.proxy_policy_fail_mode, metrics, judges.builtin, chosen, approvals);
  const outbox = new Outbox(
    {
      bus: messaging.bus,
      storage: new LmdbOutboxStorage(store),
      registry,
      metricPrefix: 'svc_proxy_outbox',
      logger: logger.child({ component: 'outbox' }),
    },
    {
      maxEntries: config.proxy_outbox_max_entries,
      maxBytes: config.proxy_outbox_max_bytes,
      publishDelayMs: config.proxy_outbox_publish_delay_ms,
    },
  );
  const podExecutionId = `pod-${hostname()}-${randomUUID().slice(0, 8)}`;
  const recorder = new EventRecorder(tenantId, source, outbox, new ProvisionalEvents(store), logger);
  // The charges of answers a process ending mid-drain left standing go out now.
  await recorder.releaseProvisional();
  const holdLogger = logger.child({ component: 'holds' });
  const holds = new HoldStates({
    tenantId,
    maxEntries: config.proxy_hold_entries,
    maxAgeMs: config.hold_max_age_seconds * 1000,
    store: store.root,
    logger: holdLogger,
  });
  const sidecar = keptSidecarState(store.root, holdLogger);
  createSidecarStateMetric(registry, () => sidecar.current);
  const allowedBudgetIds = config.allowed_budget_ids
    .split(',')
    .map((id) => id.trim())
    .filter((id) => id !== '');
  const workflows = new BudgetWorkflows({
    budgetIds: [bootstrap.budgetId, ...allowedBudgetIds],
    store: store.root,
    logger: logger.child({ component: 'budgets' }),
  });
  const envelopes = new EnvelopeRegistry({
    defaultBudgetId: bootstrap.budgetId,
    allowedBudgetIds,
    podExecutionId,
    maxEntries: config.proxy_envelope_cache_entries,
    holds,
    sidecar,
  });
  const immuneLogger = logger.child({ component: 'immune' });
  const pauses = new PauseHolds(
    {
      tenantId,
      timeoutMs: config.proxy_anomaly_hold_timeout_seconds * 1000,
      maxHeld: config.proxy_anomaly_max_held,
    },
    envelopes,
    createPauseMetrics(registry),
    heldBytes,
    {
      state: sidecar,
      moved: (anchor, from, kind) => {
        immuneLogger.warn(
          { envelope_id: anchor.envelopeId, execution_id: anchor.executionId, moved_from: from },
          "the sidecar's pause moved to another envelope, the one it rode on having ended",
        );
        void recorder.usage(anchor, movedPauseRecord(kind, from));
      },
    },
  );
  envelopes.whenEnded((envelopeId) => pauses.ended(envelopeId));
  const leaseLogger = logger.child({ component: 'lease' });
  // Spec 3.5 breaker on every request to the control plane; OPEN sends leases onto the soft limit at once.
  const controlPlane = createControlPlaneCircuit({
    requests: messaging.requests,
    registry,
    onStateChange: (to, from) =>
      leaseLogger.warn({ dependency: 'control_plane', from, to }, 'control plane circuit changed state'),
  });
  const leases = new LeaseBook(
    {
      tenantId,
      holder: `${source}:${randomUUID()}`,
      want: { tokens: config.proxy_lease_tokens, pico: Math.round(config.proxy_lease_usd * 1e6) * PICO_PER_MICRO },
      softLimit: {
        tokens: config.proxy_soft_limit_tokens,
        pico: Math.round(config.proxy_soft_limit_usd * 1e6) * PICO_PER_MICRO,
      },
      renewBelow: config.proxy_lease_renew_below,
      timeoutMs: config.proxy_lease_timeout_ms,
    },
    controlPlane.requests,
    { outcome: (outcome) => metrics.leaseRequests.inc({ outcome }), warn: (o, m) => leaseLogger.warn(o, m) },
    config.proxy_lease_first_wait_ms,
  );

  const governance: GovernanceDeps = {
    tenantId,
    workflows,
    upstream,
    prices,
    gate,
    history: new ActionHistory({ windowMs: config.proxy_sequence_window_seconds * 1000, maxScopes: 1 }),
    anomalies: new AnomalyWatch({
      action: config.proxy_anomaly_action,
      options: {
        intervalMs: config.proxy_anomaly_interval_seconds * 1000,
        alpha: 0.3,
        zThreshold: config.proxy_anomaly_z,
        warmupIntervals: 5,
        minCount: config.proxy_anomaly_min_calls,
      },
      minSpendUsd: config.proxy_anomaly_min_spend_usd,
      maxCalls: config.proxy_anomaly_max_calls,
      maxSpendUsd: config.proxy_anomaly_max_spend_usd,
      maxExecutions: config.proxy_sequence_executions,
      recorder,
      envelopes,
      pauses,
      registry,
      logger: immuneLogger,
    }),
    pauses,
    leases,
    envelopes,
    recorder,
    metrics,
    logger,
    tokens,
    bodyLimitBytes: config.proxy_body_limit_bytes,
    responseLimitBytes: config.proxy_response_limit_bytes,
    eventLimitBytes: config.proxy_stream_event_limit_bytes,
    abortDrainMs: config.proxy_abort_drain_ms,
    streamEndWaitMs: config.proxy_stream_end_wait_ms,
    unclassifiedPaths: config.proxy_unclassified_paths,
  };
  // Links in error bodies point at the admin port, which the agent's pod reaches like the proxy.
  let adminAt: string | undefined;
  const documentationBase = () => config.public_base_url ?? adminAt ?? `http://127.0.0.1:${config.proxy_admin_port}`;
  const idleGc = new IdleGc({ gc: deps.gc, idleMs: config.proxy_idle_gc_ms, registry, logger });
  const listener = new ProxyListener({
    handler: createGovernedHandler(governance, providers, mcp),
    // The handler finds a provider by its host's name on any port (as for forward requests), so
    // a CONNECT to another port of a provider host is intercepted and governed too.
    interceptHost: (host, port) => interceptList(host, port) || providers.forHost(host) !== undefined,
    governedHost: (host) => interceptList.names(host),
    egressCheck: createEgressCheck({
      check: (action, context) => gate.check(action, { ...context, tenant_id: tenantId }),
      intercepted: interceptList,
      ruleset: () => rulesets.current,
      allowedPorts: parsePorts(config.proxy_egress_ports),
    }),
    egressGuard: guard,
    leafCertificates,
    reverseRoutes: { ...DEFAULT_REVERSE_ROUTES, ...mcp.reverseRoutes },
    metrics: netMetrics,
    logger,
    documentationBase,
    port: config.proxy_port,
    host: config.proxy_host,
    tunnelConnectTimeoutMs: config.proxy_tunnel_connect_timeout_ms,
    firstBytesTimeoutMs: config.proxy_tunnel_first_bytes_timeout_ms,
    tunnelHandshakeTimeoutMs: config.proxy_tunnel_handshake_timeout_ms,
    tunnelIdleTimeoutMs: config.proxy_tunnel_idle_timeout_ms,
    activity: idleGc,
  });
  const readiness = (): Readiness =>
    rulesets.current !== null || config.proxy_policy_fail_mode === 'open'
      ? { ready: true, reasons: [] }
      : { ready: false, reasons: ['no policy ruleset synced or cached'] };
  const admin = new AdminServer({
    registry,
    readiness,
    errorPages: deps.errorPages ?? ErrorPages.load(),
    documentationBase,
    logger: logger.child({ component: 'admin' }),
    port: config.proxy_admin_port,
    host: config.proxy_admin_host,
    ...(config.metrics_token_file !== undefined
      ? { metricsAccess: metricsAccess(secretFileReader(config.metrics_token_file)) }
      : {}),
  });
  const subscriptions: Subscription[] = [];
  let stopReports = (): void => undefined;
  let stopReloading = (): void => undefined;

  return {
    caCertFile: ca.certFile,
    caCertPem: ca.certPem,
    caGenerated: ca.generated,
    registry,
    podExecutionId,
    outbox,
    rulesets,
    leases,
    envelopes,
    holds,
    readiness,
    reloadCredentials: () => credentials.reload(),
    async listen() {
      stopReloading = credentials.reloadEvery(config.provider_key_reload_seconds * 1000);
      const sync = (async () => {
        await rulesets.start();
        subscriptions.push(
          // Before the proxy serves: the holds present now are known before its first call.
          await watchHoldStates(
            messaging.keyValue,
            tenantId,
            holds,
            (hold) => {
              if (hold.status === 'RUNNING') return pauses.resume(hold.envelope_id);
              if (isFinal(hold.status)) {
                envelopes.end(hold.envelope_id, {
                  status: hold.status,
                  reason: hold.reason ?? hold.status.toLowerCase(),
                });
                // One this proxy does not serve (since a restart) may still carry the sidecar's pause.
                return pauses.ended(hold.envelope_id);
              }
              const envelope = envelopes.get(hold.envelope_id);
              if (envelope !== undefined) pauses.pause(envelope, hold.reason ?? 'paused');
            },
            logger,
          ),
          await listenForTerminations(
            messaging.signals,
            tenantId,
            (signal) =>
              envelopes.endRemote(signal.envelope_id, signal.execution_id, signal.budget_id, {
                status: 'TERMINATED',
                reason: signal.reason,
              }),
            logger,
          ),
          await approvals.listen(),
          await pauses.listen(messaging.signals, logger),
          await watchBudgetStates(
            messaging.keyValue,
            tenantId,
            (state) => {
              workflows.heard(state);
              leases.peek(state.budget_id)?.applyStatus(state.status);
            },
            logger,
          ),
        );
      })();
      // Messaging not connected yet (NATS away at start): serve from the cached ruleset and the
      // soft limit now; the watches start once NATS is reached.
      if (messaging.healthy()) await sync;
      else sync.catch((error: unknown) => logger.warn({ err: (error as Error).message }, 'state sync not started'));
      await leases.lease(bootstrap.budgetId);
      const { port: proxyPort } = await listener.listen();
      const adminAddress = await admin.listen();
      const adminPort = adminAddress.port;
      adminAt = listeningBaseUrl(adminAddress);
      stopReports = startSystemReports({
        signals: messaging.signals,
        service: 'proxy',
        intervalMs: config.system_report_interval_ms,
        health: () => {
          const ready = readiness();
          const bus = messaging.healthy();
          return Promise.resolve({
            // Without NATS it still enforces, from its cached ruleset and leases or soft limit.
            status: !ready.ready ? 'down' : bus ? 'ok' : 'degraded',
            services: {
              ruleset: ready.ready ? { status: 'ok' } : { status: 'down', detail: ready.reasons.join('; ') },
              event_bus: bus ? { status: 'ok' } : { status: 'down', detail: 'not connected' },
            },
          });
        },
        registry,
        clock: () => new Date(),
        logger,
      });
      logger.info(
        {
          proxy_port: proxyPort,
          admin_port: adminPort,
          tenant_id: tenantId,
          budget_id: bootstrap.budgetId,
          ca_cert_file: ca.certFile,
          ruleset: rulesets.origin,
        },
        'proxy listening',
      );
      return {
        proxyPort,
        adminPort,
        proxyUrl: localUrl(config.proxy_host, proxyPort),
      };
    },
    async close() {
      stopReports();
      stopReloading();
      // Held calls are answered (refused) before the listener waits for its requests to end.
      await Promise.all([approvals.close(), pauses.close()]);
      await listener.close();
      idleGc.close();
      await admin.close();
      await Promise.all(subscriptions.splice(0).map((s) => s.unsubscribe()));
      await rulesets.stop();
      await leases.releaseAll();
      // Answers still being drained are charged what stands for them, their worst case, rather
      // than left to a next start on this store.
      await recorder.releaseProvisional();
      await outbox.close();
      await upstream.close();
      tokens.free();
      await store.close();
    },
  };
}
