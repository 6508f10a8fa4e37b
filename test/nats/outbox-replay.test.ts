import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Bus, BusLogger, Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { SvcError } from '../../core/errors/index.ts';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import { Outbox } from '../../core/outbox/outbox.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const TENANT = 'acme';
const event = (n: number) => ({ id: `evt-${n}`, subject: `svc.${TENANT}.events.llm.call`, data: { n } });

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await sleep(20);
  }
}

/** Everything stored in the stream for the tenant, read back through a fresh durable. */
async function storedIds(bus: Bus, expected: number): Promise<string[]> {
  const ids: string[] = [];
  const sub = await bus.subscribe(`svc.${TENANT}.events.>`, (m) => Promise.resolve(void ids.push(m.msgId)), {
    durable: `check_${Date.now()}`,
  });
  const deadline = Date.now() + 10_000;
  while (ids.length < expected && Date.now() < deadline) await sleep(50);
  // a little longer, so a duplicate would have shown up too
  await sleep(300);
  await sub.unsubscribe();
  return ids;
}

describe('outbox over NATS', () => {
  let server: NatsServer;
  let dir: string;
  const closers: Array<() => Promise<void>> = [];
  function messaging(): Promise<Messaging> {
    return openNatsMessaging(
      {
        connection: { servers: server.url, reconnectTimeWaitMs: 100, reconnectJitterMs: 50 },
        bus: { publishTimeoutMs: 500 },
      },
      quiet,
    ).then((m) => {
      closers.push(() => m.close());
      return m;
    });
  }
  beforeEach(async () => {
    server = await startNatsServer();
    dir = await mkdtemp(join(tmpdir(), 'svc-outbox-nats-'));
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await server.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('buffers while NATS is down and replays everything in order, without duplicates, after it is back', async () => {
    const { bus } = await messaging();
    const outbox = new Outbox(
      {
        bus,
        storage: new LmdbOutboxStorage({ path: dir }),
        registry: new Registry(),
        metricPrefix: 'svc_proxy_outbox',
        logger: quiet,
      },
      { initialBackoffMs: 50, maxBackoffMs: 300 },
    );
    closers.push(() => outbox.close());
    for (let n = 1; n <= 10; n++) await outbox.append(event(n));
    await outbox.flush(5_000);

    await server.kill();
    await until(() => !bus.healthy());
    for (let n = 11; n <= 30; n++) await outbox.append(event(n));
    await sleep(700);
    expect(await outbox.depth()).toBeGreaterThan(0);

    await server.restart();
    await outbox.flush(15_000);
    await until(() => bus.healthy());
    expect(await storedIds(bus, 30)).toEqual(Array.from({ length: 30 }, (_, i) => `evt-${i + 1}`));
  });

  it('after a crash, a reopened outbox sends what was pending exactly once, even an event that already reached NATS', async () => {
    const { bus } = await messaging();
    // The crash happened after evt-1 reached NATS but before the outbox removed it.
    await bus.publish(event(1).subject, event(1).data, { msgId: event(1).id });
    const down: Bus = {
      ...bus,
      publish: () => Promise.reject(new SvcError('SVC-EVT-4001', 'unreachable')),
      healthy: () => false,
    };
    const crashed = new Outbox(
      {
        bus: down,
        storage: new LmdbOutboxStorage({ path: dir }),
        registry: new Registry(),
        metricPrefix: 'svc_proxy_outbox',
        logger: quiet,
      },
      { initialBackoffMs: 20 },
    );
    for (let n = 1; n <= 5; n++) await crashed.append(event(n));
    await crashed.close();

    const reopened = new Outbox({
      bus,
      storage: new LmdbOutboxStorage({ path: dir }),
      registry: new Registry(),
      metricPrefix: 'svc_proxy_outbox',
      logger: quiet,
    });
    closers.push(() => reopened.close());
    expect(await reopened.depth()).toBe(5);
    await reopened.flush(5_000);
    expect(await storedIds(bus, 5)).toEqual(['evt-1', 'evt-2', 'evt-3', 'evt-4', 'evt-5']);
  });
});
