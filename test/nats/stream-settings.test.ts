import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, DiscardPolicy, nanos, type JetStreamManager, type NatsConnection } from 'nats';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BusLogger, Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging, type NatsMessagingOptions } from '../../core/bus/nats-messaging.ts';
import { loadConfig } from '../../core/config/load.ts';
import { messagingFromConfig } from '../../core/config/messaging.ts';
import type { Config } from '../../core/config/schema.ts';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import { Outbox } from '../../core/outbox/outbox.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const GIB = 1024 ** 3;
const DAY_NS = nanos(86_400_000);

function atLeast(version: string, wanted: [number, number, number]): boolean {
  const parts = version.split('.').map((part) => Number.parseInt(part, 10));
  for (let i = 0; i < 3; i++) if ((parts[i] ?? 0) !== wanted[i]) return (parts[i] ?? 0) > wanted[i]!;
  return true;
}

function recordingLogger(): BusLogger & { warnings: Array<Record<string, unknown>> } {
  const warnings: Array<Record<string, unknown>> = [];
  return { warnings, warn: (object) => void warnings.push(object), error: () => undefined };
}

describe('stream and consumer settings on nats-server', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const opened: Messaging[] = [];

  beforeEach(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    jsm = await nc.jetstreamManager();
  });
  afterEach(async () => {
    for (const messaging of opened.splice(0).reverse()) await messaging.close();
    await nc.close();
    await server.dispose();
  });

  async function controlPlane(settings: Partial<Config> = {}, logger: BusLogger = recordingLogger()) {
    const config = loadConfig({}, { nats_url: server.url, ...settings });
    const messaging = await messagingFromConfig(config, logger, { name: 'control-plane', manage: true });
    opened.push(messaging);
    return messaging;
  }

  async function restart(messaging: Messaging): Promise<void> {
    opened.splice(opened.indexOf(messaging), 1);
    await messaging.close();
  }

  it('applies the configured limits to both streams, and max_ack_pending and the ack wait to a durable consumer', async () => {
    const messaging = await controlPlane({
      nats_stream_max_bytes: 64 * 1024 ** 2,
      nats_stream_max_age_seconds: 3_600,
      nats_stream_discard: 'new',
      nats_dead_letter_max_bytes: 2 * 1024 ** 2,
      nats_dead_letter_max_age_seconds: 86_400,
      nats_max_ack_pending: 4_096,
      nats_ack_wait_seconds: 7,
    });
    const events = (await jsm.streams.info('SVC_EVENTS')).config;
    expect(events).toMatchObject({
      max_bytes: 64 * 1024 ** 2,
      max_age: nanos(3_600_000),
      discard: DiscardPolicy.New,
      num_replicas: 1,
    });
    expect((await jsm.streams.info('SVC_DEAD_LETTERS')).config).toMatchObject({
      max_bytes: 2 * 1024 ** 2,
      max_age: DAY_NS,
      discard: DiscardPolicy.Old,
    });

    const sub = await messaging.bus.consumeBatches(
      'svc.*.events.>',
      'event-processor',
      { batchSize: 512, maxWaitMs: 20 },
      () => Promise.resolve(),
    );
    expect((await jsm.consumers.info('SVC_EVENTS', 'event-processor')).config).toMatchObject({
      max_ack_pending: 4_096,
      ack_wait: nanos(7_000),
    });
    await sub.unsubscribe();
  });

  it('creates the streams with the defaults, and a restart with the same settings leaves them as they are', async () => {
    const first = await controlPlane();
    const sub = await first.bus.consumeBatches(
      'svc.*.events.>',
      'event-processor',
      { batchSize: 8, maxWaitMs: 20 },
      () => Promise.resolve(),
    );
    expect((await jsm.consumers.info('SVC_EVENTS', 'event-processor')).config).toMatchObject({
      max_ack_pending: 8_192,
      ack_wait: nanos(30_000),
    });
    await sub.unsubscribe();
    for (let n = 0; n < 5; n++) await first.bus.publish('svc.acme.events.llm.call', { n });
    const before = await jsm.streams.info('SVC_EVENTS');
    expect(before.config).toMatchObject({
      max_bytes: 10 * GIB,
      max_age: 7 * DAY_NS,
      num_replicas: 1,
      discard: DiscardPolicy.Old,
    });
    expect((await jsm.streams.info('SVC_DEAD_LETTERS')).config).toMatchObject({ max_bytes: GIB, max_age: 30 * DAY_NS });
    await restart(first);

    const logger = recordingLogger();
    await controlPlane({}, logger);
    const after = await jsm.streams.info('SVC_EVENTS');
    expect(after.config).toEqual(before.config);
    expect(after.state.messages).toBe(5);
    expect(logger.warnings).toEqual([]);
  });

  it('keeps a larger limit given to the stream when the setting is unset, and lowers it only when set, warning with both values', async () => {
    await restart(await controlPlane());
    // an operator's `nats stream edit`
    const info = await jsm.streams.info('SVC_EVENTS');
    await jsm.streams.update('SVC_EVENTS', { ...info.config, max_bytes: 20 * GIB, max_age: 14 * DAY_NS });

    const unset = recordingLogger();
    await restart(await controlPlane({}, unset));
    expect((await jsm.streams.info('SVC_EVENTS')).config).toMatchObject({ max_bytes: 20 * GIB, max_age: 14 * DAY_NS });
    expect(unset.warnings).toEqual(
      expect.arrayContaining([
        { stream: 'SVC_EVENTS', limit: 'max_bytes', old: 20 * GIB, new: 10 * GIB },
        { stream: 'SVC_EVENTS', limit: 'max_age', old: 14 * DAY_NS, new: 7 * DAY_NS },
      ]),
    );

    const set = recordingLogger();
    await controlPlane({ nats_stream_max_bytes: 5 * GIB }, set);
    expect((await jsm.streams.info('SVC_EVENTS')).config).toMatchObject({ max_bytes: 5 * GIB, max_age: 14 * DAY_NS });
    expect(set.warnings).toContainEqual({ stream: 'SVC_EVENTS', limit: 'max_bytes', old: 20 * GIB, new: 5 * GIB });
  });

  describe('a full stream that discards new messages', () => {
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'svc-full-stream-'));
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    async function nats(options: Partial<NatsMessagingOptions>): Promise<Messaging> {
      const messaging = await openNatsMessaging(
        { connection: { servers: server.url }, ...options },
        { warn: () => undefined, error: () => undefined },
      );
      opened.push(messaging);
      return messaging;
    }

    it("refuses the proxy's publishes, which stay in its outbox and go out in order once there is room", async () => {
      const tiny = await nats({ manage: true, bus: { stream: { maxBytes: 2_048, discard: 'new' } } });
      // The proxy's publisher: a bus that may not manage the stream, behind the LMDB outbox.
      const proxy = await nats({ manage: false, bus: { publishTimeoutMs: 1_000 } });
      const outbox = new Outbox(
        {
          bus: proxy.bus,
          storage: new LmdbOutboxStorage({ path: dir }),
          registry: new Registry(),
          metricPrefix: 'svc_proxy_outbox',
          logger: { warn: () => undefined, error: () => undefined },
        },
        { initialBackoffMs: 50, maxBackoffMs: 200 },
      );
      try {
        const ids = Array.from({ length: 40 }, (_, n) => `evt-${n}`);
        for (const id of ids) await outbox.append({ id, subject: 'svc.acme.events.llm.call', data: { id } });

        const deadline = Date.now() + 5_000;
        let stored = 0;
        while (Date.now() < deadline) {
          await sleep(200);
          const now = (await jsm.streams.info('SVC_EVENTS')).state.messages;
          if (now > 0 && now === stored) break;
          stored = now;
        }
        expect(stored).toBeGreaterThan(0);
        expect(stored).toBeLessThan(ids.length);
        expect(await outbox.depth()).toBeGreaterThan(0);
        // Refused publishes lose nothing. At the cap itself nats-server before 2.10.5 still dropped
        // a few of the oldest (its DiscardNew size check was off: nats-io/nats-server#4771).
        const lost = (await jsm.streams.info('SVC_EVENTS')).state.first_seq - 1;
        if (atLeast(nc.info?.version ?? '0.0.0', [2, 10, 5])) expect(lost).toBe(0);
        else expect(lost).toBeLessThan(5);

        // The operator raises the limit; the control plane applies it at its next start.
        await restart(tiny);
        await nats({ manage: true, bus: { stream: { maxBytes: 1024 ** 2, discard: 'new' } } });
        await outbox.flush(10_000);

        const received: string[] = [];
        const sub = await proxy.bus.subscribe(
          'svc.acme.events.>',
          (m) => Promise.resolve(void received.push(m.msgId)),
          {
            durable: 'check',
          },
        );
        const until = Date.now() + 5_000;
        while (received.length < ids.length && Date.now() < until) await sleep(50);
        await sub.unsubscribe();
        expect(received).toEqual(ids.slice(lost));
      } finally {
        await outbox.close();
      }
    });
  });
});
