import { readFileSync } from 'node:fs';
import { Events, connect, credsAuthenticator, type ConnectionOptions, type NatsConnection } from 'nats';
import { z } from 'zod';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import type { BusLogger } from './bus.ts';

export const natsConnectionOptionsSchema = z
  .object({
    /** One URL or several (`nats://host:4222`); the client fails over between them. */
    servers: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    /** Shown in the server's connection list (`svc-proxy-<pod>`). */
    name: z.string().min(1).optional(),
    user: z.string().min(1).optional(),
    pass: z.string().optional(),
    token: z.string().min(1).optional(),
    /** A `.creds` file (JWT + nkey seed) of a decentralised-auth account. */
    credsFile: z.string().min(1).optional(),
    tls: z
      .object({
        caFile: z.string().min(1).optional(),
        certFile: z.string().min(1).optional(),
        keyFile: z.string().min(1).optional(),
      })
      .optional(),
    /** Inbox prefix for replies; a per-tenant prefix lets permissions keep tenants' replies apart. */
    inboxPrefix: z.string().min(1).optional(),
    reconnectTimeWaitMs: z.number().int().positive().default(1_000),
    reconnectJitterMs: z.number().int().nonnegative().default(500),
    /** How long one connection attempt may take. */
    connectTimeoutMs: z.number().int().positive().default(5_000),
    /**
     * Keep retrying (forever, with jitter) when no server answers at start instead of failing;
     * `connectNats` then resolves once a server is reached.
     */
    waitOnFirstConnect: z.boolean().default(false),
  })
  .refine((o) => [o.user, o.token, o.credsFile].filter((v) => v !== undefined).length <= 1, {
    message: 'give at most one of user/pass, token or credsFile',
    path: ['user'],
  });
export type NatsConnectionOptions = z.input<typeof natsConnectionOptionsSchema>;

/** A NATS connection that knows whether it is connected right now. */
export interface NatsLink {
  readonly nc: NatsConnection;
  healthy(): boolean;
  /** Calls `listener` after every reconnect; returns a function that removes it. */
  onReconnect(listener: () => void): () => void;
  close(): Promise<void>;
}

function clientOptions(options: z.output<typeof natsConnectionOptionsSchema>): ConnectionOptions {
  const base: ConnectionOptions = {
    servers: options.servers,
    name: options.name,
    inboxPrefix: options.inboxPrefix,
    // A sidecar outlives any outage: reconnect forever, spread out by jitter so a fleet of
    // proxies does not hit a restarted server in lock-step.
    maxReconnectAttempts: -1,
    reconnectTimeWait: options.reconnectTimeWaitMs,
    reconnectJitter: options.reconnectJitterMs,
    reconnectJitterTLS: options.reconnectJitterMs,
    timeout: options.connectTimeoutMs,
    waitOnFirstConnect: options.waitOnFirstConnect,
  };
  if (options.user !== undefined) Object.assign(base, { user: options.user, pass: options.pass });
  if (options.token !== undefined) base.token = options.token;
  if (options.credsFile !== undefined) base.authenticator = credsAuthenticator(readFileSync(options.credsFile));
  if (options.tls) base.tls = { ...options.tls };
  return base;
}

/** Connects (or rejects with SVC-SYS-9001 naming the servers) and tracks the connection state. */
export async function connectNats(input: NatsConnectionOptions, logger: BusLogger): Promise<NatsLink> {
  const options = parseOrThrow(natsConnectionOptionsSchema, input, 'NATS connection options');
  let nc: NatsConnection;
  try {
    nc = await connect(clientOptions(options));
  } catch (error) {
    throw new SvcError(
      'SVC-SYS-9001',
      `cannot connect to NATS at ${String(options.servers)}: ${(error as Error).message}`,
      { servers: options.servers },
    );
  }
  let connected = true;
  const reconnectListeners = new Set<() => void>();
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === Events.Disconnect) {
        connected = false;
        logger.warn({ server: status.data }, 'NATS disconnected; reconnecting');
      } else if (status.type === Events.Reconnect) {
        connected = true;
        logger.warn({ server: status.data }, 'NATS reconnected');
        for (const listener of reconnectListeners) listener();
      } else if (status.type === Events.Error) {
        logger.error({ err: status.data }, 'NATS error');
      }
    }
  })();
  return {
    nc,
    healthy: () => connected && !nc.isClosed(),
    onReconnect(listener) {
      reconnectListeners.add(listener);
      return () => void reconnectListeners.delete(listener);
    },
    async close() {
      connected = false;
      if (nc.isClosed()) return;
      // drain() fails when the connection is down; closing is then the only way out.
      await nc.drain().catch(() => nc.close());
    },
  };
}
