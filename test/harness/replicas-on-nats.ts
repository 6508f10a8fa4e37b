import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { ANNOUNCE_AFTER_MS } from '../../control-plane/auth/shared-minute-counts.ts';
import type { Config } from '../../core/config/schema.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { startControlPlane, type RunningControlPlane } from './control-plane.ts';
import { startNatsServer, type NatsServer } from './nats-server.ts';

const TENANT_ISOLATION = fileURLToPath(new URL('../../config/nats/tenant-isolation.conf', import.meta.url));

/** The control plane's user in the tenant-isolation accounts. */
export const CONTROL_PLANE_USER = { user: 'control-plane', pass: 'control-plane-secret' };

/** Well past the announcement delay and a local nats-server's transit, on a busy machine too. */
export const PROPAGATION_MS = ANNOUNCE_AFTER_MS + 300;

export interface TwoReplicas {
  nats: NatsServer;
  a: RunningControlPlane;
  b: RunningControlPlane;
  close(): Promise<void>;
}

/**
 * Two control-plane replicas (on one PostgreSQL database when the suites run on it) on one
 * nats-server with the tenant-isolation accounts, both with `settings` and `clock`.
 */
export async function startTwoReplicas(
  settings: Partial<Record<keyof Config, unknown>>,
  clock: () => Date,
): Promise<TwoReplicas> {
  const nats = await startNatsServer({ configFile: TENANT_ISOLATION });
  const messaging = () =>
    openNatsMessaging({ connection: { servers: nats.url, ...CONTROL_PLANE_USER } }, pino({ level: 'silent' }));
  const withNats = { ...settings, nats_url: nats.url };
  let a: RunningControlPlane | undefined;
  let b: RunningControlPlane;
  try {
    a = await startControlPlane(withNats, undefined, messaging, clock);
    const shared = a.databaseUrl === null ? {} : { database_url: a.databaseUrl, database_pool_size: 4 };
    b = await startControlPlane({ ...withNats, ...shared }, undefined, messaging, clock);
  } catch (error) {
    await a?.close();
    await nats.dispose();
    throw error;
  }
  return {
    nats,
    a,
    b,
    async close() {
      await b.close();
      await a.close();
      await nats.dispose();
    },
  };
}
