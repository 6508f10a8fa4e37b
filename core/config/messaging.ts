import type { Messaging } from '../bus/bus.ts';
import { createMemoryMessaging } from '../bus/memory-messaging.ts';
import { openNatsMessaging } from '../bus/nats-messaging.ts';
import type { BusLogger } from '../bus/bus.ts';
import type { Config } from './schema.ts';

/** In-process messaging in standalone mode; NATS as soon as SVC_NATS_URL is set. */
export async function messagingFromConfig(config: Config, logger: BusLogger, role: { name: string; manage: boolean }): Promise<Messaging> {
  if (config.nats_url === undefined) return createMemoryMessaging({ logger });
  const tls = config.nats_tls_ca_file ?? config.nats_tls_cert_file ?? config.nats_tls_key_file;
  return openNatsMessaging(
    {
      manage: role.manage,
      connection: {
        servers: config.nats_url.split(',').map((s) => s.trim()),
        name: role.name,
        ...(config.nats_user !== undefined ? { user: config.nats_user, pass: config.nats_password } : {}),
        ...(config.nats_token !== undefined ? { token: config.nats_token } : {}),
        ...(config.nats_creds_file !== undefined ? { credsFile: config.nats_creds_file } : {}),
        ...(tls !== undefined ? { tls: { caFile: config.nats_tls_ca_file, certFile: config.nats_tls_cert_file, keyFile: config.nats_tls_key_file } } : {}),
      },
    },
    logger,
  );
}
