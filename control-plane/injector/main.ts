import { loadConfig } from '../../core/config/load.ts';
import { requiredSetting } from '../../core/config/required.ts';
import { createLogger } from '../../core/observability/logger.ts';
import { configuredSecrets } from '../../core/observability/redact.ts';
import { failedToStart, guardProcess } from '../../core/observability/shutdown.ts';
import { loadInjectionTemplate } from './injection-template.ts';
import { InjectionWebhook } from './webhook-server.ts';

const required = (value: string | undefined, variable: string) => requiredSetting(value, variable, 'injector');

/**
 * The sidecar injection webhook (`npm run injector`). A process of its own, not a route of the
 * control plane: the API server calls it on every pod creation in governed namespaces and waits
 * at most its timeout, so it must answer in milliseconds whatever the control plane is doing; it
 * scales with pod churn rather than with governance traffic; it needs no store and no NATS; and a
 * control-plane outage or upgrade must not block pod creation cluster-wide (nor the reverse).
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger({ level: config.log_level, service: 'injector', secrets: configuredSecrets(config) });
  const guard = guardProcess(logger);
  const webhook = new InjectionWebhook({
    host: config.http_host,
    port: config.injector_port,
    certFile: required(config.injector_tls_cert_file, 'SVC_INJECTOR_TLS_CERT_FILE'),
    keyFile: required(config.injector_tls_key_file, 'SVC_INJECTOR_TLS_KEY_FILE'),
    template: loadInjectionTemplate(required(config.injector_template_file, 'SVC_INJECTOR_TEMPLATE_FILE')),
    logger,
  });
  const address = await webhook.listen();
  logger.info({ address: address.address, port: address.port }, 'injector listening');
  guard.onShutdown(() => webhook.close());
}

main().catch((error: unknown) => failedToStart('injector', error));
