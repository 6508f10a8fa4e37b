import { fileURLToPath } from 'node:url';
import type { NatsConnection } from 'nats';
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

/** A proxy's user of tenant `acme` in the tenant-isolation accounts. */
export const PROXY_ACME_USER = { user: 'proxy-acme', pass: 'proxy-acme-secret', inboxPrefix: '_INBOX_acme' };

/** An announcement of `count` for `key` in the current minute of `clock`, as a replica sends it. */
export function announcement(clock: () => Date, key: string, count: number): Uint8Array {
  const minute = Math.floor(clock().getTime() / 60_000);
  return new TextEncoder().encode(JSON.stringify({ replica: 'forger', minute, counts: [{ key, count }] }));
}

/**
 * What the server answers `connection` publishing `message` on `subject` and subscribing to it:
 * the error's text, or `answered` / `delivered` where it was let through.
 */
export async function attempts(
  connection: NatsConnection,
  subject: string,
  message: Uint8Array,
): Promise<{ published: string; read: string }> {
  const published = await connection.request(subject, message, { timeout: 1_000 }).then(
    () => 'answered',
    (error: unknown) => (error as Error).message,
  );
  const read = await new Promise<string>((resolve) => {
    connection.subscribe(subject, { callback: (error) => resolve(error?.message ?? 'delivered') });
    void connection.flush();
  });
  return { published, read };
}
