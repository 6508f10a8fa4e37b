import { ensureSidecarIdentity } from '../control-plane/bootstrap/sidecar-identity.ts';
import { createControlPlane } from '../control-plane/create-control-plane.ts';
import { ControlPlaneMetrics } from '../control-plane/observability/metrics.ts';
import { createPricer } from '../control-plane/usage/pricer.ts';
import { loadConfig } from '../core/config/load.ts';
import { messagingFromConfig } from '../core/config/messaging.ts';
import { priceTableFromConfig } from '../core/metering/price-table-from-config.ts';
import { createLogger } from '../core/observability/logger.ts';
import { configuredSecrets } from '../core/observability/redact.ts';
import { failedToStart, guardProcess } from '../core/observability/shutdown.ts';
import { createProxy } from '../proxy/create-proxy.ts';
import { writeTrustBundle } from '../proxy/tls/index.ts';
import { dirname, join, resolve } from 'node:path';

/**
 * Standalone mode (`npm start`): the control plane and the sidecar proxy in one process, with
 * embedded LMDB and in-process messaging. At first start the sidecar's tenant, unlimited default
 * budget and key are created, and the proxy's CA is generated; all of it is printed.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env, { mode: 'standalone' });
  const logger = createLogger({ level: config.log_level, service: 'standalone', secrets: configuredSecrets(config) });
  const guard = guardProcess(logger);
  const metrics = new ControlPlaneMetrics();
  const messaging = await messagingFromConfig(config, logger, {
    name: 'standalone',
    manage: true,
    registry: metrics.registry,
  });
  const prices = priceTableFromConfig(config);
  const plane = await createControlPlane({
    config,
    logger: logger.child({ component: 'control-plane' }),
    messaging,
    metrics,
    pricer: createPricer(prices),
  });
  guard.expose(plane.metrics.registry);
  const controlPlane = await plane.listen();
  const { identity } = await ensureSidecarIdentity(plane, {
    dataDir: config.data_dir,
    tenantId: config.tenant_id,
    budgetId: config.budget_id,
  });
  const proxy = await createProxy({
    config,
    logger: logger.child({ component: 'proxy' }),
    messaging,
    prices,
    bootstrap: { tenantId: identity.tenant_id, apiKey: identity.api_key, budgetId: identity.budget_id },
    gc: globalThis.gc,
  });
  const addresses = await proxy.listen();
  // Absolute paths: the agent that uses them runs from another directory.
  const caFile = resolve(proxy.caCertFile);
  const bundle = writeTrustBundle(join(dirname(caFile), 'ca-bundle.pem'), proxy.caCertPem);
  logger.info(
    {
      control_plane: controlPlane,
      grpc_port: plane.grpcPort(),
      proxy: addresses.proxyUrl,
      tenant_id: identity.tenant_id,
      budget_id: identity.budget_id,
    },
    'standalone ready',
  );
  const line = (label: string, value: string) => `${label.padEnd(17)}${value}`;
  process.stdout.write(
    [
      '',
      line('control plane', `${controlPlane}  (REST /v1, OpenAPI /openapi.json, metrics /metrics)`),
      line('gRPC', `${config.http_host}:${String(plane.grpcPort())}  (reflection and grpc.health.v1 on)`),
      line('proxy', `${addresses.proxyUrl}  (admin: http://127.0.0.1:${addresses.adminPort}/metrics)`),
      line('proxy CA', `${caFile}${proxy.caGenerated ? '  (generated now)' : ''}`),
      line('trust bundle', `${bundle}  (public roots + proxy CA)`),
      line('tenant', identity.tenant_id),
      line('default budget', `${identity.budget_id}  (unlimited)`),
      line('sidecar API key', identity.api_key),
      line(
        'administrator',
        config.bootstrap_admin_key === undefined
          ? 'set SVC_BOOTSTRAP_ADMIN_KEY to enable the root administrator key'
          : 'SVC_BOOTSTRAP_ADMIN_KEY is the root administrator key',
      ),
      '',
      'Point an agent at the proxy:',
      `  export HTTPS_PROXY=${addresses.proxyUrl} NODE_USE_ENV_PROXY=1`,
      `  export NODE_EXTRA_CA_CERTS=${caFile} SSL_CERT_FILE=${bundle} REQUESTS_CA_BUNDLE=${bundle}`,
      `  or set the SDK's base URL to ${addresses.proxyUrl}/openai/v1 (or /anthropic, /gemini)`,
      '',
    ].join('\n'),
  );
  // SIGHUP re-reads the provider key files (a rotated Secret) without a restart.
  process.on('SIGHUP', () => void proxy.reloadCredentials());
  guard.onShutdown(async () => {
    await proxy.close();
    await plane.close();
    await messaging.close();
  });
}

main().catch((error: unknown) => failedToStart('standalone', error));
