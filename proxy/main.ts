import { loadConfig } from '../core/config/load.ts';
import { deferMessaging } from '../core/bus/deferred-messaging.ts';
import { messagingFromConfig } from '../core/config/messaging.ts';
import { requiredSetting } from '../core/config/required.ts';
import { priceTableFromConfig } from '../core/metering/price-table-from-config.ts';
import { createLogger } from '../core/observability/logger.ts';
import { Registry } from 'prom-client';
import { registerNatsConnected } from '../core/observability/nats-metric.ts';
import { configuredSecrets, createScrubber } from '../core/observability/redact.ts';
import { failedToStart, guardProcess } from '../core/observability/shutdown.ts';
import { createProxy } from './create-proxy.ts';
import { writeTrustBundle } from './tls/index.ts';

/** The sidecar process: traffic on SVC_PROXY_PORT, admin on SVC_PROXY_ADMIN_PORT, state over SVC_NATS_URL. */
async function main(): Promise<void> {
  const config = loadConfig(process.env, { mode: 'proxy' });
  const logger = createLogger({ level: config.log_level, service: 'proxy', secrets: configuredSecrets(config) });
  const guard = guardProcess(logger);
  const bootstrap = {
    tenantId: requiredSetting(config.tenant_id, 'SVC_TENANT_ID', 'proxy'),
    apiKey: requiredSetting(config.api_key, 'SVC_API_KEY', 'proxy'),
    budgetId: requiredSetting(config.budget_id, 'SVC_BUDGET_ID', 'proxy'),
  };
  // A sidecar starts even while NATS is away: it enforces its cached ruleset, runs budgets on the
  // soft limit and buffers events until the connection is made (spec 7.4b).
  const messaging = deferMessaging({
    open: () =>
      messagingFromConfig(config, logger, {
        name: `proxy-${bootstrap.tenantId}`,
        manage: false,
        tenant: bootstrap.tenantId,
      }),
    logger,
    onFatal: (error) => {
      const message = createScrubber(configuredSecrets(config)).text((error as Error).message);
      process.stderr.write(`proxy cannot open messaging: ${message}\n`);
      process.exit(1);
    },
  });
  // With NATS up, start as current as a direct connection would. A refused connection ends the
  // first attempt at once and the proxy serves from local state; one that hangs is given 2 s.
  await Promise.race([messaging.firstAttempt, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  const prices = priceTableFromConfig(config);
  const registry = new Registry();
  registerNatsConnected(registry, () => messaging.healthy());
  const proxy = await createProxy({ config, logger, messaging, prices, bootstrap, registry, gc: globalThis.gc });
  guard.expose(proxy.registry);
  // Written before the ports open: an injected pod's agent starts once the sidecar is ready.
  if (config.proxy_trust_bundle_file !== undefined) writeTrustBundle(config.proxy_trust_bundle_file, proxy.caCertPem);
  await proxy.listen();
  // SIGHUP re-reads the provider key files (a rotated Secret) without a restart.
  process.on('SIGHUP', () => void proxy.reloadCredentials());
  guard.onShutdown(async () => {
    await proxy.close();
    await messaging.close();
  });
}

main().catch((error: unknown) => failedToStart('proxy', error));
