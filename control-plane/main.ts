import { loadConfig } from '../core/config/load.ts';
import { messagingFromConfig } from '../core/config/messaging.ts';
import { priceTableFromConfig } from '../core/metering/price-table-from-config.ts';
import { createLogger } from '../core/observability/logger.ts';
import { configuredSecrets } from '../core/observability/redact.ts';
import { failedToStart, guardProcess } from '../core/observability/shutdown.ts';
import { createControlPlane } from './create-control-plane.ts';
import { ControlPlaneMetrics } from './observability/metrics.ts';
import { createPricer } from './usage/pricer.ts';
import { registerNatsConnected } from '../core/observability/nats-metric.ts';

/** The control plane process: REST on SVC_HTTP_PORT, gRPC on SVC_GRPC_PORT, events over SVC_NATS_URL or in process. */
async function main(): Promise<void> {
  const config = loadConfig(process.env, { mode: 'control-plane' });
  const logger = createLogger({
    level: config.log_level,
    service: 'control-plane',
    secrets: configuredSecrets(config),
  });
  // The drain cuts what is still busy after the grace; this bound is for a stop that hangs after it.
  const guard = guardProcess(logger, { shutdownTimeoutMs: config.shutdown_grace_ms + 5_000 });
  const metrics = new ControlPlaneMetrics();
  const messaging = await messagingFromConfig(config, logger, {
    name: 'control-plane',
    manage: true,
    registry: metrics.registry,
  });
  const prices = priceTableFromConfig(config);
  const plane = await createControlPlane({ config, logger, messaging, metrics, pricer: createPricer(prices) });
  guard.expose(plane.metrics.registry);
  if (config.nats_url !== undefined) registerNatsConnected(plane.metrics.registry, () => messaging.healthy());
  const address = await plane.listen();
  logger.info(
    { address, grpc_port: plane.grpcPort(), nats: config.nats_url ?? 'in-process' },
    'control plane listening',
  );
  guard.onShutdown(async () => {
    await plane.close();
    await messaging.close();
  });
}

main().catch((error: unknown) => failedToStart('control plane', error));
