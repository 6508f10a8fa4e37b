import { ensureSidecarIdentity } from '../control-plane/bootstrap/sidecar-identity.ts';
import { createControlPlane } from '../control-plane/create-control-plane.ts';
import { createPricer } from '../control-plane/usage/pricer.ts';
import { loadConfig } from '../core/config/load.ts';
import { messagingFromConfig } from '../core/config/messaging.ts';
import { loadPriceTable } from '../core/metering/prices.ts';
import { createLogger } from '../core/observability/logger.ts';
import { onShutdown } from '../core/observability/shutdown.ts';

/**
 * Standalone mode (`npm start`): the control plane with embedded LMDB and in-process messaging,
 * and the sidecar's identity created at first start. No external service is needed.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env, { mode: 'standalone' });
  const logger = createLogger({ level: config.log_level, service: 'standalone' });
  const messaging = await messagingFromConfig(config, logger, { name: 'standalone', manage: true });
  const prices = loadPriceTable(config.price_overrides_file !== undefined ? { overridePath: config.price_overrides_file } : {});
  const plane = await createControlPlane({ config, logger: logger.child({ component: 'control-plane' }), messaging, pricer: createPricer(prices) });
  const address = await plane.listen();
  const { identity, created } = await ensureSidecarIdentity(plane, { dataDir: config.data_dir, tenantId: config.tenant_id, budgetId: config.budget_id });
  logger.info({ control_plane: address, tenant_id: identity.tenant_id, budget_id: identity.budget_id, created }, 'standalone ready');
  process.stdout.write(
    [
      '',
      `control plane   ${address}  (REST /v1, OpenAPI /openapi.json, metrics /metrics)`,
      `tenant          ${identity.tenant_id}`,
      `default budget  ${identity.budget_id} (unlimited)`,
      `sidecar API key ${identity.api_key}`,
      config.bootstrap_admin_key === undefined ? 'administrator   set SVC_BOOTSTRAP_ADMIN_KEY to enable the root administrator key' : 'administrator   SVC_BOOTSTRAP_ADMIN_KEY is the root administrator key',
      '',
    ].join('\n'),
  );
  onShutdown(logger, async () => {
    await plane.close();
    await messaging.close();
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`standalone failed to start: ${(error as Error).message}\n`);
  process.exit(1);
});
