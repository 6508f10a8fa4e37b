import { AckPolicy, connect, nanos, RetentionPolicy, StorageType } from 'nats';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger, KeyValueEntry, Messaging } from '../../core/bus/bus.ts';
import { connectNats } from '../../core/bus/nats-connection.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

function recordingLogger(): BusLogger & { errors: string[] } {
  const errors: string[] = [];
  return { errors, warn: () => undefined, error: (_o, message) => void errors.push(message) };
}

async function until(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await sleep(20);
  }
}

/**
 * Publishes one message from a child process at `at` (epoch ms): it reaches the server, and the
 * server's delivery reaches this process's socket, whatever this process's event loop is doing.
 */
function publishFromChild(url: string, at: number, subject: string, data: unknown): Promise<number | null> {
  const script = `
    import { connect } from 'nats';
    const [url, at, subject, data] = process.argv.slice(1);
    const nc = await connect({ servers: url });
    await new Promise((resolve) => setTimeout(resolve, Number(at) - Date.now()));
    await nc.jetstream().publish(subject, new TextEncoder().encode(data));
    await nc.close();`;
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', script, url, String(at), subject, JSON.stringify(data)],
    {
      stdio: 'inherit',
    },
  );
  return new Promise((resolve) => child.on('exit', resolve));
}

describe('NATS bus specifics', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await server.dispose();
  });

  const open = (logger: BusLogger, bus: object = {}): Promise<Messaging> =>
    openNatsMessaging(
      {
        connection: { servers: server.url, reconnectTimeWaitMs: 100, reconnectJitterMs: 50 },
        bus: { retryBackoffMs: 20, ...bus },
      },
      logger,
    );

  it('hands a lone event to a batch consumer within maxWaitMs, not at the pull expiry, and keeps batches whole under load', async () => {
    const messaging = await open(recordingLogger());
    const batches: Array<{ size: number; at: number }> = [];
    await messaging.bus.consumeBatches(
      'svc.*.events.>',
      'latency-probe',
      { batchSize: 100, maxWaitMs: 30 },
      (messages) => {
        batches.push({ size: messages.length, at: Date.now() });
        return Promise.resolve();
      },
    );
    await sleep(300);
    const sent = Date.now();
    await messaging.bus.publish('svc.t.events.llm.call', { n: 0 }, { msgId: 'lone-0' });
    await until(() => batches.length === 1, 5_000);
    expect(batches[0]!.at - sent).toBeLessThan(500);
    await Promise.all(
      Array.from({ length: 250 }, (_, i) =>
        messaging.bus.publish('svc.t.events.llm.call', { n: i + 1 }, { msgId: `burst-${i}` }),
      ),
    );
    await until(() => batches.reduce((sum, b) => sum + b.size, 0) === 251, 10_000);
    expect(Math.max(...batches.map((b) => b.size))).toBeLessThanOrEqual(100);
    await messaging.close();
  });

  it('hands over a message the server sent just before a pull ended, read after an event-loop stall, without waiting for the ack wait', async () => {
    const messaging = await open(recordingLogger(), { pullExpiresMs: 4_000 });
    // The pull requests on the wire, as the server receives them.
    const observer = await connect({ servers: server.url });
    const pulls: Array<{ at: number; expiresMs: number }> = [];
    observer.subscribe('$JS.API.CONSUMER.MSG.NEXT.*.stall-probe', {
      callback: (_error, msg) => {
        const { expires } = msg.json<{ expires: number }>();
        pulls.push({ at: Date.now(), expiresMs: expires / 1e6 });
      },
    });
    await observer.flush();
    const received = new Map<number, number>();
    await messaging.bus.consumeBatches(
      'svc.stall.events.>',
      'stall-probe',
      { batchSize: 100, maxWaitMs: 5 },
      (batch) => {
        for (const m of batch) received.set((m.data as { n: number }).n, Date.now());
        return Promise.resolve();
      },
    );
    await until(() => pulls.length > 0);
    const pull = pulls.at(-1)!;
    // 40 ms before the server ends the pull, another process publishes a message, which the
    // server sends on at once; this process's event loop is held meanwhile (a long commit, a GC)
    // from 100 ms before until 100 ms after that end.
    const sendAt = pull.at + pull.expiresMs - 40;
    const publisher = publishFromChild(server.url, sendAt, 'svc.stall.events.x', { n: 1 });
    await sleep(sendAt - 60 - Date.now());
    // Held in a callback of the check phase, as a long synchronous commit holds it: when it ends,
    // the loop's timers run before its sockets are read.
    const resumed = await new Promise<number>((resolve) =>
      setImmediate(() => {
        while (Date.now() < pull.at + pull.expiresMs + 100);
        resolve(Date.now());
      }),
    );
    expect(await publisher).toBe(0);
    await until(() => received.has(1), 10_000);
    expect(received.get(1)! - resumed).toBeLessThan(5_000);
    await observer.close();
    await messaging.close();
  });

  it('closes its open pull when it unsubscribes, hands back what that pull brought, and the next subscriber of the durable gets it about a second later', async () => {
    const first = await open(recordingLogger());
    const handed: number[] = [];
    const gate = Promise.withResolvers<void>();
    const subscription = await first.bus.consumeBatches(
      'svc.handback.events.>',
      'hand-back',
      { batchSize: 10, maxWaitMs: 5 },
      async (batch) => {
        handed.push(...batch.map((m) => (m.data as { n: number }).n));
        await gate.promise;
      },
    );
    await first.bus.publish('svc.handback.events.x', { n: 0 }, { msgId: 'hb-0' });
    await until(() => handed.length === 1);
    // These reach the open pull while the first batch is still being handled.
    for (let n = 1; n <= 5; n++) await first.bus.publish('svc.handback.events.x', { n }, { msgId: `hb-${n}` });
    await sleep(100);
    const stopping = Date.now();
    const stopped = subscription.unsubscribe();
    gate.resolve();
    await stopped;
    // Not the pull's 30 s expiry.
    expect(Date.now() - stopping).toBeLessThan(5_000);
    expect(handed).toEqual([0]);

    const second = await open(recordingLogger());
    const got: number[] = [];
    const resumed = Date.now();
    await second.bus.consumeBatches('svc.handback.events.>', 'hand-back', { batchSize: 10, maxWaitMs: 5 }, (batch) => {
      got.push(...batch.map((m) => (m.data as { n: number }).n));
      return Promise.resolve();
    });
    await second.bus.publish('svc.handback.events.x', { n: 6 }, { msgId: 'hb-6' });
    await until(() => got.length === 6, 20_000);
    expect(Date.now() - resumed).toBeLessThan(5_000);
    expect(got.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    await second.close();
    await first.close();
  });

  it('keeps a batch whose handling outlasts the ack wait from being redelivered meanwhile', async () => {
    const messaging = await open(recordingLogger(), { ackWaitMs: 600 });
    for (let i = 0; i < 3; i++) await messaging.bus.publish('svc.slow.events.x', { n: i }, { msgId: `slow-${i}` });
    const handed: { n: number; deliveryCount: number }[] = [];
    const subscription = await messaging.bus.consumeBatches(
      'svc.slow.events.>',
      'slow-batches',
      { batchSize: 3, maxWaitMs: 50 },
      async (messages, applied) => {
        for (const m of messages) handed.push({ n: (m.data as { n: number }).n, deliveryCount: m.deliveryCount });
        // Three ack waits long.
        await sleep(1_800);
        applied();
      },
    );
    await until(() => handed.length >= 3);
    // Long enough for a redelivery of anything left unacknowledged to be handed over.
    await sleep(2_500);
    await subscription.unsubscribe();
    expect(handed).toEqual([0, 1, 2].map((n) => ({ n, deliveryCount: 1 })));
    await messaging.close();
  });

  it('hands the next batch over once a batch says it is applied, and acknowledges each on its own success', async () => {
    const messaging = await open(recordingLogger(), { ackWaitMs: 1_500 });
    const subject = 'svc.pipe.events.llm.call';
    const pattern = 'svc.pipe.events.>';
    for (let i = 0; i < 6; i++) await messaging.bus.publish(subject, { n: i }, { msgId: `pipe-${i}` });
    const handed: number[][] = [];
    const first = Promise.withResolvers<void>();
    const subscription = await messaging.bus.consumeBatches(
      pattern,
      'pipelined',
      { batchSize: 3, maxWaitMs: 50 },
      (messages, applied) => {
        handed.push(messages.map((m) => (m.data as { n: number }).n));
        applied();
        // The first batch fails after it said it was applied: none of it may be acknowledged.
        return handed.length === 1 ? first.promise : Promise.resolve();
      },
    );
    await until(() => handed.length === 2);
    expect(handed).toEqual([
      [0, 1, 2],
      [3, 4, 5],
    ]);
    first.reject(new Error('commit failed'));
    // Handed over again one at a time; the second batch, acknowledged, does not come back.
    await until(() => handed.length === 5);
    await sleep(2_000);
    await subscription.unsubscribe();
    expect(handed.slice(2)).toEqual([[0], [1], [2]]);
    await messaging.close();
  });

  it('creates the event stream with file storage, limits retention, 7 day age and the de-dup window, and updates its limits', async () => {
    const messaging = await open(recordingLogger(), { stream: { maxBytes: 1024 ** 3 } });
    await messaging.close();
    const again = await open(recordingLogger(), { stream: { maxBytes: 2 * 1024 ** 3, duplicateWindowMs: 300_000 } });
    await again.close();
    const nc = await connect({ servers: server.url });
    const info = await (await nc.jetstreamManager()).streams.info('SVC_EVENTS');
    await nc.close();
    expect(info.config).toMatchObject({
      subjects: ['svc.*.envelopes.>', 'svc.*.events.>', 'svc.*.budgets.>', 'svc.*.policies.>'],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      max_age: nanos(7 * 24 * 3_600_000),
      max_bytes: 2 * 1024 ** 3,
      duplicate_window: nanos(300_000),
    });
  });

  it('sets aside a message whose handler keeps failing after maxDeliver attempts, logs it, and goes on', async () => {
    const logger = recordingLogger();
    const messaging = await open(logger, { maxDeliver: 3 });
    const attempts: string[] = [];
    await messaging.bus.subscribe(
      'svc.poison.events.>',
      (m) => {
        attempts.push(`${m.msgId}#${m.deliveryCount}`);
        return m.msgId === 'bad' ? Promise.reject(new Error('cannot apply')) : Promise.resolve();
      },
      { durable: 'poison' },
    );
    await messaging.bus.publish('svc.poison.events.x', {}, { msgId: 'bad' });
    await messaging.bus.publish('svc.poison.events.x', {}, { msgId: 'good' });
    await until(() => attempts.includes('good#1'));
    expect(attempts).toEqual(['bad#1', 'bad#2', 'bad#3', 'good#1']);
    expect(logger.errors).toEqual(['bus message set aside']);
    await messaging.close();
    const nc = await connect({ servers: server.url });
    const letter = await (
      await nc.jetstreamManager()
    ).streams.getMessage('SVC_DEAD_LETTERS', { last_by_subj: 'deadletter.svc.poison.events.x' });
    await nc.close();
    expect(letter.header.get('Svc-Msg-Id')).toBe('bad');
    expect(letter.header.get('Svc-Reason')).toBe('failed');
  });

  it('reuses an existing durable and brings its limits up to date, the server-side delivery cap lifted', async () => {
    const first = await open(recordingLogger());
    await first.close();
    const nc = await connect({ servers: server.url });
    const jsm = await nc.jetstreamManager();
    // As an earlier release left it: the server stopped redelivering after max_deliver, silently.
    await jsm.consumers.add('SVC_EVENTS', {
      durable_name: 'limits',
      ack_policy: AckPolicy.Explicit,
      filter_subject: 'svc.limits.events.>',
      max_deliver: 3,
    });
    const second = await open(recordingLogger(), { maxDeliver: 7, ackWaitMs: 12_000 });
    await second.bus.subscribe('svc.limits.events.>', () => Promise.resolve(), { durable: 'limits' });
    await second.close();
    const info = await jsm.consumers.info('SVC_EVENTS', 'limits');
    await nc.close();
    expect(info.config).toMatchObject({
      max_deliver: -1,
      ack_wait: nanos(12_000),
      filter_subject: 'svc.limits.events.>',
    });
  });

  it('sets a durable up again when it was deleted under a running subscriber', async () => {
    const messaging = await open(recordingLogger());
    const got: unknown[] = [];
    await messaging.bus.subscribe('svc.gone.events.>', (m) => Promise.resolve(void got.push(m.data)), {
      durable: 'gone',
    });
    const nc = await connect({ servers: server.url });
    await (await nc.jetstreamManager()).consumers.delete('SVC_EVENTS', 'gone');
    await nc.close();
    await sleep(200);
    await messaging.bus.publish('svc.gone.events.x', { n: 1 });
    await until(() => got.length === 1);
    expect(got).toEqual([{ n: 1 }]);
    await messaging.close();
  });

  it('removes the consumer of a plain subscription when it unsubscribes, and keeps a durable one', async () => {
    const messaging = await open(recordingLogger());
    const plain = await messaging.bus.subscribe('svc.cons.events.>', () => Promise.resolve());
    await messaging.bus.subscribe('svc.cons.events.>', () => Promise.resolve(), { durable: 'kept' });
    await plain.unsubscribe();
    await messaging.close();
    const nc = await connect({ servers: server.url });
    const consumers = await (await nc.jetstreamManager()).consumers.list('SVC_EVENTS').next();
    await nc.close();
    const names = consumers.map((c) => c.name);
    expect(names).toContain('kept');
    expect(names.filter((n) => n.startsWith('eph_'))).toEqual([]);
  });

  it('reports health, and a durable subscriber and a key-value watch carry on after a server restart', async () => {
    const messaging = await open(recordingLogger());
    const got: unknown[] = [];
    const plain: unknown[] = [];
    await messaging.bus.subscribe('svc.restart.events.>', (m) => Promise.resolve(void got.push(m.data)), {
      durable: 'restart',
    });
    await messaging.bus.subscribe('svc.restart.events.>', (m) => Promise.resolve(void plain.push(m.data)));
    const kv = await messaging.keyValue.open('svc_restart');
    const seen: KeyValueEntry[] = [];
    await kv.watch('ruleset.restart.>', (entry) => void seen.push(entry));
    await messaging.bus.publish('svc.restart.events.x', { n: 1 });
    await kv.put('ruleset.restart.v', { version: 1 });
    await until(() => got.length === 1 && seen.length === 1);
    expect(messaging.healthy()).toBe(true);

    await server.stop();
    await until(() => !messaging.healthy());
    await server.restart();
    await until(() => messaging.healthy());

    await messaging.bus.publish('svc.restart.events.x', { n: 2 });
    await kv.put('ruleset.restart.v', { version: 2 });
    await until(() => got.length === 2 && seen.length === 2 && plain.length === 2);
    expect(got).toEqual([{ n: 1 }, { n: 2 }]);
    expect(plain).toEqual([{ n: 1 }, { n: 2 }]);
    expect(seen.map((e) => e.value)).toEqual([{ version: 1 }, { version: 2 }]);
    await messaging.close();
  });

  it('rejects bad connection options naming the field, and an unreachable server with SVC-SYS-9001', async () => {
    await expect(connectNats({ servers: [] }, recordingLogger())).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'servers' }],
    });
    await expect(connectNats({ servers: server.url, user: 'a', token: 't' }, recordingLogger())).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'user' }],
    });
    await expect(
      connectNats({ servers: 'nats://127.0.0.1:1', connectTimeoutMs: 500 }, recordingLogger()),
    ).rejects.toMatchObject({ code: 'SVC-SYS-9001' });
  });

  it('with waitOnFirstConnect, keeps trying until the server comes up', async () => {
    await server.stop();
    let connected = false;
    const pending = connectNats(
      { servers: server.url, waitOnFirstConnect: true, reconnectTimeWaitMs: 100, reconnectJitterMs: 10 },
      recordingLogger(),
    ).then((link) => {
      connected = true;
      return link;
    });
    await sleep(500);
    expect(connected).toBe(false);
    await server.restart();
    const link = await pending;
    expect(link.healthy()).toBe(true);
    await link.close();
  });
});
