import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { open, type RootDatabase } from 'lmdb';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import type { Messaging, Subscription } from '../core/bus/bus.ts';
import type { Config } from '../core/config/schema.ts';
import type { PriceTable } from '../core/metering/prices.ts';
import { createTokenCounter } from '../core/metering/tokens.ts';
import { AdminServer, createProxyNetMetrics, type Readiness } from './admin/index.ts';
import { createControlPlaneCircuit, LeaseBook, PICO_PER_MICRO } from './enforcement/index.ts';
import { EnvelopeRegistry } from './envelopes/index.ts';
import { createGovernedHandler, EventRecorder, PolicyGate, type GovernanceDeps } from './governance/index.ts';
import { DEFAULT_REVERSE_ROUTES, ProxyListener } from './listener/index.ts';
import { parseMcpServers } from './mcp/index.ts';
import { createGovernanceMetrics } from './metrics/index.ts';
import { Outbox } from './outbox/outbox.ts';
import { createAdapterDeps, createDefaultAdapters, createProviderRegistry } from './providers/index.ts';
import { listenForTerminations, RulesetSource, watchBudgetStates } from './sync/index.ts';
import { LeafCertificateCache, loadOrCreateCa } from './tls/index.ts';
import { parseUpstreamOverrides, UpstreamClient, upstreamTrust } from './upstream/index.ts';

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
  readiness(): Readiness;
  /** Starts the sync watch, the default budget's lease, the terminate listener and both ports. */
  listen(): Promise<ProxyAddresses>;
  /** Stops taking traffic, returns leases, and closes the outbox (pending events stay on disk). */
  close(): Promise<void>;
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '');
}

/** Builds the sidecar from its dependencies; nothing listens until `listen()`. */
export async function createProxy(deps: ProxyDeps): Promise<Proxy> {
  const { config, logger, messaging, prices, bootstrap } = deps;
  const { tenantId } = bootstrap;
  mkdirSync(config.data_dir, { recursive: true });
  const store: RootDatabase = open({ path: join(config.data_dir, 'proxy') });

  const generatedDir = join(config.data_dir, 'proxy-ca');
  const ca = await loadOrCreateCa({
    certFile: config.ca_cert_file ?? join(generatedDir, 'ca.pem'),
    keyFile: config.ca_key_file ?? join(generatedDir, 'ca-key.pem'),
    allowGenerate: config.mode === 'standalone' && config.ca_cert_file === undefined,
  });
  const leafCertificates = await LeafCertificateCache.create({ caCertPem: ca.certPem, caKeyPem: ca.keyPem });

  const registry = deps.registry ?? new Registry();
  const netMetrics = createProxyNetMetrics(registry);
  const metrics = createGovernanceMetrics(registry, config.proxy_model_label_cap);
  const tokens = createTokenCounter();
  const compatibleHosts = list(config.proxy_compatible_hosts);
  const providers = createProviderRegistry(
    createDefaultAdapters(createAdapterDeps(tokens, prices), { compatibleHosts }),
  );
  const mcp = parseMcpServers(config.proxy_mcp_servers);
  const upstream = new UpstreamClient({
    overrides: parseUpstreamOverrides(config.upstream_overrides),
    ...(config.upstream_ca_file !== undefined ? { ca: await upstreamTrust(config.upstream_ca_file) } : {}),
    metrics: netMetrics,
  });

  const rulesets = new RulesetSource({
    tenantId,
    keyValue: messaging.keyValue,
    store,
    logger: logger.child({ component: 'ruleset' }),
  });
  const gate = new PolicyGate(rulesets, config.proxy_policy_fail_mode, metrics);
  const outbox = new Outbox({
    bus: messaging.bus,
    store: { root: store },
    registry,
    logger: logger.child({ component: 'outbox' }),
  });
  const podExecutionId = `pod-${hostname()}-${randomUUID().slice(0, 8)}`;
  const source = `proxy:${hostname()}`;
  const recorder = new EventRecorder(tenantId, source, outbox, logger);
  const envelopes = new EnvelopeRegistry({ defaultBudgetId: bootstrap.budgetId, podExecutionId });
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
    upstream,
    prices,
    gate,
    leases,
    envelopes,
    recorder,
    metrics,
    logger,
    bodyLimitBytes: config.proxy_body_limit_bytes,
  };
  const extraIntercept = list(config.proxy_intercept_hosts);
  const interceptHost = (host: string, port: number): boolean => {
    const h = host.toLowerCase();
    const withPort = `${h}:${port}`;
    if (providers.forHost(h) !== undefined || providers.forHost(withPort) !== undefined) return true;
    if (mcp.hosts.has(h) || mcp.hosts.has(withPort)) return true;
    return extraIntercept.some((p) => p === h || p === withPort || (p.startsWith('*.') && h.endsWith(p.slice(1))));
  };
  const listener = new ProxyListener({
    handler: createGovernedHandler(governance, providers, mcp),
    interceptHost,
    egressCheck: (host, port) => {
      // Without a ruleset a governed host stays reachable: its calls are refused in the provider's
      // own format by the handler, which an agent's SDK reports better than a refused tunnel.
      if (rulesets.current === null && interceptHost(host, port)) return 'allow';
      return gate.check('network:connect', { host, port }).allowed ? 'allow' : 'deny';
    },
    leafCertificates,
    reverseRoutes: { ...DEFAULT_REVERSE_ROUTES, ...mcp.reverseRoutes },
    metrics: netMetrics,
    logger,
    port: config.proxy_port,
    host: config.proxy_host,
  });
  const readiness = (): Readiness =>
    rulesets.current !== null || config.proxy_policy_fail_mode === 'open'
      ? { ready: true, reasons: [] }
      : { ready: false, reasons: ['no policy ruleset synced or cached'] };
  const admin = new AdminServer({
    registry,
    readiness,
    port: config.proxy_admin_port,
    host: config.proxy_admin_host ?? config.proxy_host,
  });
  const subscriptions: Subscription[] = [];

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
    readiness,
    async listen() {
      const sync = (async () => {
        await rulesets.start();
        subscriptions.push(
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
          await watchBudgetStates(
            messaging.keyValue,
            tenantId,
            (state) => leases.peek(state.budget_id)?.applyStatus(state.status),
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
      const { port: adminPort } = await admin.listen();
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
        proxyUrl: `http://${config.proxy_host === '0.0.0.0' ? '127.0.0.1' : config.proxy_host}:${proxyPort}`,
      };
    },
    async close() {
      await listener.close();
      await admin.close();
      await Promise.all(subscriptions.splice(0).map((s) => s.unsubscribe()));
      await rulesets.stop();
      await leases.releaseAll();
      await outbox.close();
      await upstream.close();
      tokens.free();
      await store.close();
    },
  };
}
