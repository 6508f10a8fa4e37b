import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { acked, busContract } from '../../test/bus/bus.contract.ts';
import { eventually } from '../../test/harness/eventually.ts';
import type { BusLogger, BusMessage } from './bus.ts';
import { MemoryBus } from './memory-bus.ts';
import { createMemoryMessaging } from './memory-messaging.ts';

function recordingLogger(): BusLogger & { errors: string[]; warnings: string[]; objects: unknown[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  const objects: unknown[] = [];
  return {
    errors,
    warnings,
    objects,
    error: (object, message) => void (errors.push(message), objects.push(object)),
    warn: (_o, message) => void warnings.push(message),
  };
}

/** The `n` each message carries, in order. */
const numbers = (messages: BusMessage[]) => messages.map((m) => (m.data as { n: number }).n);

busContract('memory', (registry) =>
  Promise.resolve(createMemoryMessaging({ logger: recordingLogger(), retryBackoffMs: 10, maxDeliver: 3, registry })),
);

describe('MemoryBus', () => {
  it('sets aside a message after maxDeliver attempts, logs it without its payload, and moves on', async () => {
    const logger = recordingLogger();
    const bus = new MemoryBus({ logger, maxDeliver: 3, retryBackoffMs: 1 });
    const attempts: string[] = [];
    await bus.subscribe('svc.a.events.>', (m) => {
      attempts.push(`${m.msgId}#${m.deliveryCount}`);
      return m.msgId === 'bad' ? Promise.reject(new Error('poison')) : Promise.resolve();
    });
    await bus.publish('svc.a.events.x', { prompt: 'secret words' }, { msgId: 'bad' });
    await bus.publish('svc.a.events.x', {}, { msgId: 'good' });
    await bus.close();
    expect(attempts).toEqual(['bad#1', 'bad#2', 'bad#3', 'good#1']);
    expect(logger.warnings).toHaveLength(3);
    expect(logger.errors).toEqual(['bus message set aside']);
    expect(JSON.stringify(logger.objects)).not.toContain('secret words');
    expect(logger.objects.at(-1)).toMatchObject({ subject: 'svc.a.events.x', msg_id: 'bad', reason: 'failed', seq: 1 });
  });

  it('hands the next batch over once a batch says it is applied, and moves the durable past batches only once settled', async () => {
    const bus = new MemoryBus({ logger: recordingLogger(), retryBackoffMs: 1 });
    for (let n = 0; n < 6; n++) await bus.publish('svc.a.events.x', { n }, { msgId: `m${n}` });
    const handed: number[][] = [];
    const first = Promise.withResolvers<void>();
    const subscription = await bus.consumeBatches(
      'svc.a.events.>',
      'pipe',
      { batchSize: 3, maxWaitMs: 10 },
      (messages, applied) => {
        handed.push(numbers(messages));
        applied();
        // The first batch fails after it said it was applied, while the second is already done.
        return handed.length === 1 ? first.promise : Promise.resolve();
      },
    );
    await eventually(
      () => handed.length,
      (n) => n === 2,
    );
    expect(handed).toEqual([
      [0, 1, 2],
      [3, 4, 5],
    ]);
    first.reject(new Error('commit failed'));
    // Handed over again one at a time, after which the second batch is not handed over again.
    await eventually(
      () => handed.length,
      (n) => n === 5,
    );
    await sleep(50);
    expect(handed.slice(2)).toEqual([[0], [1], [2]]);
    await subscription.unsubscribe();

    // The durable resumes after everything settled.
    const resumed: number[][] = [];
    await bus.consumeBatches('svc.a.events.>', 'pipe', { batchSize: 3, maxWaitMs: 10 }, (messages) =>
      acked(resumed.push(numbers(messages))),
    );
    await bus.publish('svc.a.events.x', { n: 6 }, { msgId: 'm6' });
    await bus.close();
    expect(resumed).toEqual([[6]]);
  });

  it('a durable stopped while a batch is still being applied resumes from that batch', async () => {
    const bus = new MemoryBus({ logger: recordingLogger() });
    for (let n = 0; n < 6; n++) await bus.publish('svc.a.events.x', { n }, { msgId: `m${n}` });
    const handed: number[][] = [];
    const commit = Promise.withResolvers<void>();
    const subscription = await bus.consumeBatches(
      'svc.a.events.>',
      'slow',
      { batchSize: 3, maxWaitMs: 10 },
      (messages, applied) => {
        handed.push(numbers(messages));
        applied();
        return handed.length === 2 ? commit.promise : Promise.resolve();
      },
    );
    await eventually(
      () => handed.length,
      (n) => n === 2,
    );
    const stopping = subscription.unsubscribe();
    // Stopping waits for the batch in flight, and only then is the durable free again.
    await sleep(20);
    await expect(
      bus.consumeBatches('svc.a.events.>', 'slow', { batchSize: 3, maxWaitMs: 10 }, () => acked()),
    ).rejects.toMatchObject({ code: 'SVC-SYS-9008' });
    commit.resolve();
    await stopping;
    const resumed: number[] = [];
    await bus.consumeBatches('svc.a.events.>', 'slow', { batchSize: 3, maxWaitMs: 10 }, (messages) =>
      acked(resumed.push(...numbers(messages))),
    );
    await bus.publish('svc.a.events.x', { n: 6 }, { msgId: 'm6' });
    await bus.close();
    expect(resumed).toEqual([6]);
  });

  it('close drains what was appended and refuses new messages with SVC-EVT-4001', async () => {
    const bus = new MemoryBus({ logger: recordingLogger() });
    const got: number[] = [];
    await bus.subscribe('svc.a.events.>', async (m) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      got.push((m.data as { n: number }).n);
    });
    for (let n = 0; n < 5; n++) await bus.publish('svc.a.events.x', { n });
    await bus.close();
    expect(got).toEqual([0, 1, 2, 3, 4]);
    expect(bus.healthy()).toBe(false);
    await expect(bus.publish('svc.a.events.x', {})).rejects.toMatchObject({ code: 'SVC-EVT-4001' });
  });

  it('forgets a msgId after the duplicate window, and bounds the window by size', async () => {
    let now = 0;
    const bus = new MemoryBus({
      logger: recordingLogger(),
      duplicateWindowMs: 1_000,
      duplicateWindowSize: 2,
      now: () => now,
    });
    const got: string[] = [];
    await bus.subscribe('svc.a.events.>', (m) => acked(got.push(m.msgId)), { durable: 'all' });
    await bus.publish('svc.a.events.x', {}, { msgId: 'a' });
    now = 500;
    await bus.publish('svc.a.events.x', {}, { msgId: 'a' });
    now = 1_600;
    await bus.publish('svc.a.events.x', {}, { msgId: 'a' });
    await bus.publish('svc.a.events.x', {}, { msgId: 'b' });
    await bus.publish('svc.a.events.x', {}, { msgId: 'c' });
    await bus.publish('svc.a.events.x', {}, { msgId: 'a' });
    await bus.close();
    expect(got).toEqual(['a', 'a', 'b', 'c', 'a']);
  });

  it('keeps at most about maxMessages for new durables, dropping the oldest first', async () => {
    const bus = new MemoryBus({ logger: recordingLogger(), maxMessages: 10 });
    for (let n = 0; n < 30; n++) await bus.publish('svc.a.events.x', { n });
    const got: number[] = [];
    await bus.subscribe('svc.a.events.>', (m) => acked(got.push((m.data as { n: number }).n)), { durable: 'late' });
    await bus.close();
    expect(got.length).toBeGreaterThanOrEqual(10);
    expect(got.length).toBeLessThanOrEqual(11);
    expect(got).toEqual(Array.from({ length: got.length }, (_, i) => 30 - got.length + i));
  });

  it('drops what every durable following it has passed, so consumed messages hold no memory', async () => {
    const bus = new MemoryBus({ logger: recordingLogger() });
    const seen: number[] = [];
    await bus.subscribe('svc.a.events.>', (m) => acked(seen.push((m.data as { n: number }).n)), { durable: 'p' });
    const blob = 'x'.repeat(10_000);
    for (let n = 0; n < 50; n++) await bus.publish('svc.a.events.x', { n, blob });
    await eventually(
      () => seen.length,
      (n) => n === 50,
    );
    // Published before any durable follows it: kept for the one made next.
    await bus.publish('svc.a.policies.x', { n: 50 });
    const late: BusMessage[] = [];
    for (const pattern of ['svc.a.events.>', 'svc.a.policies.>'])
      await bus.subscribe(pattern, (m) => acked(late.push(m)), { durable: `late-${pattern.split('.')[2]}` });
    await bus.close();
    expect(numbers(late)).toEqual([50]);
  });

  it('keeps at most maxBytes for a stalled durable, dropping the oldest first, counted and logged once without payload', async () => {
    const registry = new Registry();
    const warnings: Array<[Record<string, unknown>, string]> = [];
    const logger: BusLogger = {
      warn: (object, message) => void warnings.push([object, message]),
      error: () => undefined,
    };
    const bus = new MemoryBus({ logger, maxBytes: 200_000, registry });
    const stalled = await bus.subscribe('svc.a.events.>', () => acked(), { durable: 'stalled' });
    await stalled.unsubscribe();
    const blob = 'x'.repeat(10_000);
    for (let n = 0; n < 100; n++) await bus.publish('svc.a.events.x', { n, blob });
    const got: number[] = [];
    await bus.subscribe('svc.a.events.>', (m) => acked(got.push((m.data as { n: number }).n)), { durable: 'stalled' });
    await bus.close();
    expect(got.length).toBeGreaterThanOrEqual(17);
    expect(got.length).toBeLessThanOrEqual(19);
    expect(got).toEqual(Array.from({ length: got.length }, (_, i) => 100 - got.length + i));
    const counted = (await registry.getSingleMetric('svc_bus_unread_discarded_total')!.get()).values;
    expect(counted).toEqual([{ labels: { consumer: 'stalled', bound: 'max_bytes' }, value: 100 - got.length }]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]![1]).toBe('bus messages discarded unread at the in-process bounds');
    expect(warnings[0]![0]).toMatchObject({ consumer: 'stalled', bound: 'max_bytes' });
    expect(JSON.stringify(warnings)).not.toContain('xxxx');
  });

  it('refuses a second active subscriber on one durable and a payload JSON cannot carry', async () => {
    const bus = new MemoryBus({ logger: recordingLogger() });
    await bus.subscribe('svc.a.events.>', () => acked(), { durable: 'one' });
    await expect(bus.subscribe('svc.a.events.>', () => acked(), { durable: 'one' })).rejects.toMatchObject({
      code: 'SVC-SYS-9008',
    });
    await expect(bus.publish('svc.a.events.x', { n: 1n })).rejects.toMatchObject({ code: 'SVC-EVT-4002' });
    await bus.close();
  });
});
