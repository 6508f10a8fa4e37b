import type { Registry } from 'prom-client';
import type { Messaging } from '../bus/bus.ts';
import { createMemoryMessaging } from '../bus/memory-messaging.ts';
import type { NatsBusOptions } from '../bus/nats-bus.ts';
import { openNatsMessaging } from '../bus/nats-messaging.ts';
import type { BusLogger } from '../bus/bus.ts';
import type { Config } from './schema.ts';

/**
 * In-process messaging in standalone mode; NATS as soon as SVC_NATS_URL is set. A proxy passes
 * its tenant: it then takes replies on `_INBOX_<tenant>` (or SVC_NATS_INBOX_PREFIX), the inbox its
 * credentials are confined to under the isolation configuration of docs/nats.md. A process that
 * consumes from the bus passes its metrics registry, which gets `svc_bus_poison_messages_total`.
 */
export async function messagingFromConfig(
  config: Config,
  logger: BusLogger,
  role: { name: string; manage: boolean; tenant?: string; registry?: Registry },
): Promise<Messaging> {
  if (config.nats_url === undefined) return createMemoryMessaging({ logger, registry: role.registry });
  const prefix = config.nats_inbox_prefix ?? (role.tenant === undefined ? undefined : `_INBOX_${role.tenant}`);
  const tls = config.nats_tls_ca_file ?? config.nats_tls_cert_file ?? config.nats_tls_key_file;
  const { servers, credentials } = serversOf(config.nats_url);
  const explicit = config.nats_user ?? config.nats_token ?? config.nats_creds_file;
  return openNatsMessaging(
    {
      manage: role.manage,
      registry: role.registry,
      bus: busOptionsOf(config),
      connection: {
        servers,
        name: role.name,
        ...(prefix !== undefined ? { inboxPrefix: prefix } : {}),
        ...(config.nats_user !== undefined ? { user: config.nats_user, pass: config.nats_password } : {}),
        ...(config.nats_token !== undefined ? { token: config.nats_token } : {}),
        ...(config.nats_creds_file !== undefined ? { credsFile: config.nats_creds_file } : {}),
        ...(explicit === undefined ? credentials : {}),
        ...(tls !== undefined
          ? {
              tls: {
                caFile: config.nats_tls_ca_file,
                certFile: config.nats_tls_cert_file,
                keyFile: config.nats_tls_key_file,
              },
            }
          : {}),
      },
    },
    logger,
  );
}

/** The stream and consumer settings; an unset limit is left to the bus (docs/nats.md, "Stream limits"). */
function busOptionsOf(config: Config): NatsBusOptions {
  const seconds = (value: number | undefined) => (value === undefined ? undefined : value * 1000);
  return {
    stream: {
      maxBytes: config.nats_stream_max_bytes,
      maxAgeMs: seconds(config.nats_stream_max_age_seconds),
      replicas: config.nats_stream_replicas,
      discard: config.nats_stream_discard,
    },
    deadLetters: {
      enabled: config.nats_dead_letters === 'on',
      maxBytes: config.nats_dead_letter_max_bytes,
      maxAgeMs: seconds(config.nats_dead_letter_max_age_seconds),
      replicas: config.nats_stream_replicas,
    },
    ...(config.nats_max_ack_pending !== undefined ? { maxAckPending: config.nats_max_ack_pending } : {}),
    ...(config.nats_ack_wait_seconds !== undefined ? { ackWaitMs: config.nats_ack_wait_seconds * 1000 } : {}),
  };
}

/**
 * The server list of SVC_NATS_URL, and the credentials written into it (`nats://user:pass@host`,
 * or `nats://token@host`), which the client library would not read from there. Explicit
 * SVC_NATS_USER, _TOKEN or _CREDS_FILE settings win over them.
 */
function serversOf(natsUrl: string): {
  servers: string[];
  credentials: { user?: string; pass?: string; token?: string };
} {
  let credentials: { user?: string; pass?: string; token?: string } = {};
  const servers = natsUrl.split(',').map((raw) => {
    const server = raw.trim();
    const url = URL.parse(server.includes('://') ? server : `nats://${server}`);
    if (url === null || url.username === '') return server;
    const user = decodeURIComponent(url.username);
    credentials = url.password === '' ? { token: user } : { user, pass: decodeURIComponent(url.password) };
    return `${url.protocol}//${url.host}`;
  });
  return { servers, credentials };
}
