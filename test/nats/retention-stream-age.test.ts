import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, nanos, type JetStreamManager, type NatsConnection } from 'nats';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BusLogger, Messaging } from '../../core/bus/bus.ts';
import { STREAM_DEFAULTS, streamConfig, natsStreamOptionsSchema } from '../../core/bus/nats-stream.ts';
import { loadConfig } from '../../core/config/load.ts';
import { messagingFromConfig } from '../../core/config/messaging.ts';
import { VIOLATION_DEDUP_SCOPE } from '../../control-plane/processor/event-processor.ts';
import { RetentionSweep } from '../../control-plane/retention/retention-sweep.ts';
import { LmdbStorage } from '../../control-plane/storage/lmdb/lmdb-storage.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { anEvent, at, NOW } from '../storage/records.ts';

const DAY = 86_400_000;
const TENANT = 'acme';
const quiet: BusLogger = { warn: () => undefined, error: () => undefined };

describe('retention against the event stream nats-server keeps', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let messaging: Messaging;
  let storage: LmdbStorage;
  let dir: string;

  beforeEach(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    jsm = await nc.jetstreamManager();
    // Made before the control plane, without an age limit (as `nats stream add` or an edit could).
    await jsm.streams.add({ ...streamConfig(natsStreamOptionsSchema.parse({})), max_age: 0 });
    const config = loadConfig({}, { nats_url: server.url });
    messaging = await messagingFromConfig(config, quiet, { name: 'control-plane', manage: true });
    dir = mkdtempSync(join(tmpdir(), 'retention-stream-'));
    ({ storage } = await LmdbStorage.open({ path: dir }));
    await storage.withTransaction(async (tx) => {
      await tx.tenants.create({ tenant_id: TENANT, name: 'Acme', created_at: at(-40 * DAY) });
      await tx.events.insertNew(TENANT, [anEvent(TENANT, { received_at: at(-40 * DAY) })]);
      await tx.dedup.markProcessed(TENANT, VIOLATION_DEDUP_SCOPE, 'old', at(-40 * DAY));
    });
  });
  afterEach(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
    await messaging.close();
    await nc.close();
    await server.dispose();
  });

  async function sweep(): Promise<{ removed: Record<string, number>; kept: Array<number | null> }> {
    const kept: Array<number | null> = [];
    const retention = new RetentionSweep({
      storage,
      days: 30,
      batchSize: 10,
      clock: () => NOW,
      onRemoved: () => {},
      redeliverableForMs: () => messaging.bus.redeliverableForMs(),
      onDedupKept: (ms) => kept.push(ms),
    });
    return { removed: await retention.runOnce(new AbortController().signal), kept };
  }

  it('keeps events and violation entries while the stream keeps messages as long as the retention, or longer', async () => {
    // The control plane's default does not shrink the stream it found: it stays unlimited.
    expect(await messaging.bus.redeliverableForMs()).toBeNull();
    expect(await sweep()).toMatchObject({ removed: { events: 0, processed_messages: 0 }, kept: [null] });

    await jsm.streams.update('SVC_EVENTS', { max_age: nanos(30 * DAY) });
    expect(await sweep()).toMatchObject({ removed: { events: 0, processed_messages: 0 }, kept: [30 * DAY] });
    expect((await storage.read.events.list(TENANT, {})).items).toHaveLength(1);
  });

  it('removes them once the stream keeps messages for less than the retention', async () => {
    await jsm.streams.update('SVC_EVENTS', { max_age: nanos(STREAM_DEFAULTS.maxAgeMs) });
    expect(await messaging.bus.redeliverableForMs()).toBe(STREAM_DEFAULTS.maxAgeMs);
    expect(await sweep()).toMatchObject({ removed: { events: 1, processed_messages: 1 }, kept: [] });
  });
});
