import { afterAll, beforeAll } from 'vitest';
import { busContract } from '../bus/bus.contract.ts';
import type { BusLogger } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
let server: NatsServer;

beforeAll(async () => {
  server = await startNatsServer();
});
afterAll(async () => {
  await server.dispose();
});

busContract('nats', (registry) =>
  openNatsMessaging(
    { connection: { servers: server.url }, bus: { retryBackoffMs: 50, maxDeliver: 3 }, registry },
    quiet,
  ),
);
