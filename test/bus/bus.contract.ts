import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import type { BusMessage, KeyValueEntry, Messaging } from '../../core/bus/bus.ts';

/** Polls until `check` stops throwing, so tests wait for asynchronous delivery without fixed sleeps. */
async function eventually(check: () => void | Promise<void>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(20);
    }
  }
}

/** A handler that records synchronously and acknowledges. */
export function acked(_recorded?: unknown): Promise<void> {
  return Promise.resolve();
}

/** A fresh tenant token per test keeps tests apart on a shared stream. */
function tenant(): string {
  return `t${randomUUID().slice(0, 8)}`;
}

function durableName(): string {
  return `d${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

/** The value of `svc_bus_poison_messages_total` for one consumer and reason. */
async function poisonCount(registry: Registry, consumer: string, reason: string): Promise<number> {
  const metric = await registry.getSingleMetric('svc_bus_poison_messages_total')?.get();
  return metric?.values.find((v) => v.labels.consumer === consumer && v.labels.reason === reason)?.value ?? 0;
}

/**
 * The behaviour every Messaging implementation promises. `makeMessaging` must configure short
 * redelivery backoffs (well under a second) and at most 3 delivery attempts, so the redelivery
 * cases finish quickly, and register the bus's metrics in the registry it is given.
 */
export function busContract(name: string, makeMessaging: (registry: Registry) => Promise<Messaging>): void {
  describe(`bus contract: ${name}`, () => {
    const opened: Messaging[] = [];
    let registry = new Registry();
    async function open(): Promise<Messaging> {
      registry = new Registry();
      const messaging = await makeMessaging(registry);
      opened.push(messaging);
      return messaging;
    }
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((m) => m.close()));
    });

    it('delivers a published message to a subscriber with subject, data, msgId and first attempt', async () => {
      const { bus } = await open();
      const t = tenant();
      const got: BusMessage[] = [];
      await bus.subscribe(`svc.${t}.events.>`, (m) => acked(got.push(m)));
      await bus.publish(`svc.${t}.events.llm.call`, { tokens: 12, at: new Date(0) }, { msgId: 'e-1' });
      await eventually(() => expect(got).toHaveLength(1));
      expect(got[0]).toEqual({
        subject: `svc.${t}.events.llm.call`,
        data: { tokens: 12, at: '1970-01-01T00:00:00.000Z' },
        msgId: 'e-1',
        deliveryCount: 1,
      });
      expect(bus.healthy()).toBe(true);
    });

    it('matches `*` to one token and `>` to the rest', async () => {
      const { bus } = await open();
      const t = tenant();
      const star: string[] = [];
      const rest: string[] = [];
      await bus.subscribe(`svc.${t}.envelopes.*`, (m) => acked(star.push(m.subject)));
      await bus.subscribe(`svc.*.events.>`, (m) => acked(m.subject.startsWith(`svc.${t}.`) && rest.push(m.subject)));
      await bus.publish(`svc.${t}.envelopes.created`, {});
      await bus.publish(`svc.${t}.envelopes.started.late`, {});
      await bus.publish(`svc.${t}.events.tool.invoke`, {});
      await bus.publish(`svc.${t}.events.llm.call`, {});
      await bus.publish(`svc.${t}.budgets.exceeded`, {});
      await eventually(() => expect(rest).toHaveLength(2));
      await sleep(100);
      expect(star).toEqual([`svc.${t}.envelopes.created`]);
      expect(rest).toEqual([`svc.${t}.events.tool.invoke`, `svc.${t}.events.llm.call`]);
    });

    it('accepts a msgId once', async () => {
      const { bus } = await open();
      const t = tenant();
      await bus.publish(`svc.${t}.events.llm.call`, { n: 1 }, { msgId: 'same' });
      await bus.publish(`svc.${t}.events.llm.call`, { n: 2 }, { msgId: 'same' });
      await bus.publish(`svc.${t}.events.llm.call`, { n: 3 }, { msgId: 'other' });
      const got: unknown[] = [];
      await bus.subscribe(`svc.${t}.events.>`, (m) => acked(got.push(m.data)), { durable: durableName() });
      await eventually(() => expect(got).toHaveLength(2));
      await sleep(100);
      expect(got).toEqual([{ n: 1 }, { n: 3 }]);
    });

    it('keeps per-subject order under concurrent publishes', async () => {
      const { bus } = await open();
      const t = tenant();
      const got = new Map<string, number[]>();
      await bus.subscribe(`svc.${t}.envelopes.*`, (m) =>
        acked(got.set(m.subject, [...(got.get(m.subject) ?? []), (m.data as { i: number }).i])),
      );
      const count = 40;
      await Promise.all(
        Array.from({ length: count }, (_, i) =>
          bus.publish(`svc.${t}.envelopes.${i % 2 === 0 ? 'started' : 'completed'}`, { i }),
        ),
      );
      await eventually(() => expect([...got.values()].flat()).toHaveLength(count));
      const expected = Array.from({ length: count }, (_, i) => i);
      expect(got.get(`svc.${t}.envelopes.started`)).toEqual(expected.filter((i) => i % 2 === 0));
      expect(got.get(`svc.${t}.envelopes.completed`)).toEqual(expected.filter((i) => i % 2 === 1));
    });

    it('redelivers a message whose handler rejected, before moving on', async () => {
      const { bus } = await open();
      const t = tenant();
      const seen: string[] = [];
      let failed = false;
      await bus.subscribe(
        `svc.${t}.events.>`,
        (m) => {
          seen.push(`${(m.data as { n: number }).n}#${m.deliveryCount}`);
          if (failed) return acked();
          failed = true;
          return Promise.reject(new Error('store unavailable'));
        },
        { durable: durableName() },
      );
      await bus.publish(`svc.${t}.events.llm.call`, { n: 1 });
      await bus.publish(`svc.${t}.events.llm.call`, { n: 2 });
      await eventually(() => expect(seen).toHaveLength(3));
      expect(seen).toEqual(['1#1', '1#2', '2#1']);
    });

    it('resumes a durable subscription where it left off', async () => {
      const { bus } = await open();
      const t = tenant();
      const durable = durableName();
      const first: unknown[] = [];
      const sub = await bus.subscribe(`svc.${t}.events.>`, (m) => acked(first.push(m.data)), { durable });
      for (const n of [1, 2, 3]) await bus.publish(`svc.${t}.events.llm.call`, { n });
      await eventually(() => expect(first).toHaveLength(3));
      await sub.unsubscribe();
      for (const n of [4, 5]) await bus.publish(`svc.${t}.events.llm.call`, { n });
      const second: unknown[] = [];
      await bus.subscribe(`svc.${t}.events.>`, (m) => acked(second.push(m.data)), { durable });
      await eventually(() => expect(second).toHaveLength(2));
      await sleep(100);
      expect(second).toEqual([{ n: 4 }, { n: 5 }]);
      await expect(
        bus.subscribe(`svc.${t}.budgets.>`, () => acked(), { durable: `${durable}x` }),
      ).resolves.toBeDefined();
      await expect(
        bus.consumeBatches(`svc.${t}.budgets.>`, durable, { batchSize: 10, maxWaitMs: 100 }, () => acked()),
      ).rejects.toMatchObject({
        code: 'SVC-SYS-9008',
        fieldViolations: [{ field: 'durable' }],
      });
    });

    it('consumes in ordered batches and hands a rejected batch over again one message at a time', async () => {
      const { bus } = await open();
      const t = tenant();
      for (let n = 0; n < 10; n++) await bus.publish(`svc.${t}.events.llm.call`, { n }, { msgId: `${t}-${n}` });
      const applied: number[] = [];
      const sizes: number[] = [];
      const counts: number[][] = [];
      let failures = 0;
      await bus.consumeBatches(`svc.${t}.events.>`, durableName(), { batchSize: 4, maxWaitMs: 100 }, (messages) => {
        sizes.push(messages.length);
        counts.push(messages.map((m) => m.deliveryCount));
        if (failures === 0 && messages.length > 1) {
          failures++;
          return Promise.reject(new Error('transaction aborted'));
        }
        return acked(applied.push(...messages.map((m) => (m.data as { n: number }).n)));
      });
      await eventually(() => expect(applied).toHaveLength(10));
      expect(applied).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(4);
      expect(failures).toBe(1);
      // the failed batch comes back message by message, each on its second delivery
      const failed = sizes[0] ?? 0;
      expect(counts[0]?.every((c) => c === 1)).toBe(true);
      expect(counts.slice(1, 1 + failed)).toEqual(Array.from({ length: failed }, () => [2]));
      expect(await poisonCount(registry, 'ephemeral', 'failed')).toBe(0);
    });

    it('sets aside the message a batch handler refuses and acknowledges the rest', async () => {
      const { bus } = await open();
      const t = tenant();
      for (let n = 0; n < 6; n++) await bus.publish(`svc.${t}.events.llm.call`, { n }, { msgId: `${t}-${n}` });
      const durable = durableName();
      const handled: number[] = [];
      const sub = await bus.consumeBatches(
        `svc.${t}.events.>`,
        durable,
        { batchSize: 6, maxWaitMs: 100 },
        (messages) => {
          const refused = messages.filter((m) => (m.data as { n: number }).n === 2);
          handled.push(...messages.filter((m) => !refused.includes(m)).map((m) => (m.data as { n: number }).n));
          return Promise.resolve(refused.map((message) => ({ message, reason: 'n: invalid_value' })));
        },
      );
      await eventually(() => expect(handled).toEqual([0, 1, 3, 4, 5]));
      await eventually(async () => expect(await poisonCount(registry, durable, 'refused')).toBe(1));
      await sub.unsubscribe();
      // Nothing comes back: the refused message was settled as well as the handled ones.
      const again: number[] = [];
      await bus.consumeBatches(`svc.${t}.events.>`, durable, { batchSize: 6, maxWaitMs: 100 }, (messages) =>
        acked(again.push(...messages.map((m) => (m.data as { n: number }).n))),
      );
      await bus.publish(`svc.${t}.events.llm.call`, { n: 6 }, { msgId: `${t}-6` });
      await eventually(() => expect(again).toEqual([6]));
    });

    it('sets aside alone a message whose handler keeps failing, and handles the rest of its batch in order', async () => {
      const { bus } = await open();
      const t = tenant();
      for (let n = 0; n < 5; n++) await bus.publish(`svc.${t}.events.llm.call`, { n }, { msgId: `${t}-${n}` });
      const durable = durableName();
      const handled: number[] = [];
      const attemptsOfBad: number[] = [];
      await bus.consumeBatches(`svc.${t}.events.>`, durable, { batchSize: 5, maxWaitMs: 100 }, (messages) => {
        const bad = messages.find((m) => (m.data as { n: number }).n === 3);
        if (bad !== undefined) {
          attemptsOfBad.push(bad.deliveryCount);
          return Promise.reject(new SvcError('SVC-ENV-1001', 'envelope not found'));
        }
        return acked(handled.push(...messages.map((m) => (m.data as { n: number }).n)));
      });
      await eventually(() => expect(handled).toEqual([0, 1, 2, 4]));
      await bus.publish(`svc.${t}.events.llm.call`, { n: 5 }, { msgId: `${t}-5` });
      await eventually(() => expect(handled).toEqual([0, 1, 2, 4, 5]));
      expect(attemptsOfBad.at(-1)).toBe(3);
      expect(await poisonCount(registry, durable, 'failed')).toBe(1);
    });

    it('refuses a payload above the message limit as terminal SVC-SYS-9009', async () => {
      const { bus } = await open();
      await expect(
        bus.publish(`svc.${tenant()}.events.llm.call`, { text: 'x'.repeat(2 * 1024 * 1024) }),
      ).rejects.toMatchObject({
        code: 'SVC-SYS-9009',
        fieldViolations: [{ field: 'data' }],
      });
    });

    it('rejects a wildcard or out-of-stream subject, a pattern across families and a durable with a dot', async () => {
      const { bus } = await open();
      await expect(bus.publish('svc.*.events.llm.call', {})).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        fieldViolations: [{ field: 'subject' }],
      });
      await expect(bus.publish('svc.a.leases.request', {})).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        fieldViolations: [{ field: 'subject' }],
      });
      await expect(bus.subscribe('svc.a.>', () => acked())).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        fieldViolations: [{ field: 'pattern' }],
      });
      await expect(bus.subscribe('svc.a.events.>', () => acked(), { durable: 'a.b' })).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        fieldViolations: [{ field: 'durable' }],
      });
    });

    it('keeps the last value per key and watches current values first, then changes up to the current state', async () => {
      const { keyValue } = await open();
      const kv = await keyValue.open('svc_contract');
      const t = tenant();
      const other = tenant();
      const key = `ruleset.${t}.v`;
      await kv.put(key, { version: 1 });
      await kv.put(key, { version: 2 });
      await kv.put(`ruleset.${other}.v`, { version: 9 });
      expect(await kv.get(key)).toMatchObject({ key, value: { version: 2 }, operation: 'PUT' });
      expect(await kv.get(`ruleset.${t}.missing`)).toBeUndefined();

      const seen: KeyValueEntry[] = [];
      const watch = await kv.watch(`ruleset.${t}.>`, (entry) => void seen.push(entry));
      expect(seen.map((e) => e.value)).toEqual([{ version: 2 }]);
      const revision = await kv.put(key, { version: 3 });
      await kv.delete(key);
      await kv.put(`ruleset.${other}.v`, { version: 10 });
      // A bucket of history 1 holds only the newest entry per key: version 3, deleted right after it
      // was written, may be gone before the watch sends it. The watch promises order and the end state.
      await eventually(() => expect(seen.at(-1)).toMatchObject({ key, operation: 'DEL', value: undefined }));
      await sleep(100);
      const changes = seen.slice(1);
      expect(changes.at(-1)?.operation).toBe('DEL');
      expect(changes.length).toBeLessThanOrEqual(2);
      for (const change of changes.slice(0, -1)) {
        expect(change).toMatchObject({ key, value: { version: 3 }, revision, operation: 'PUT' });
      }
      expect(changes.every((e, i) => e.key === key && e.revision > (seen[i]?.revision ?? 0))).toBe(true);
      expect(await kv.get(key)).toBeUndefined();
      await watch.unsubscribe();
      await expect(kv.put('bad:key', 1)).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        fieldViolations: [{ field: 'key' }],
      });
    });

    it('ends a watch on the newest value when changes come faster than it delivers them', async () => {
      const { keyValue } = await open();
      const kv = await keyValue.open('svc_contract');
      const key = `ruleset.${tenant()}.v`;
      await kv.put(key, { n: -1 });
      const seen: KeyValueEntry[] = [];
      const watch = await kv.watch(key, async (entry) => {
        await sleep(1);
        seen.push(entry);
      });
      // Written without waiting for each other, as the control plane does when many changes land at once.
      const revisions = await Promise.all(Array.from({ length: 30 }, (_, n) => kv.put(key, { n })));
      const last = Math.max(...revisions);
      await eventually(() => expect(seen.at(-1)?.revision).toBe(last));
      expect(seen.at(-1)).toMatchObject({ key, value: { n: 29 }, operation: 'PUT' });
      expect(await kv.get(key)).toMatchObject({ value: { n: 29 }, revision: last });
      expect(seen.every((e, i) => i === 0 || e.revision > (seen[i - 1]?.revision ?? 0))).toBe(true);
      await watch.unsubscribe();
    });

    it('removes values older than the age limit of the bucket, also of a bucket opened before with another', async () => {
      const { keyValue } = await open();
      const bucket = `svc_aged_${tenant().replace(/[^a-zA-Z0-9]/g, '')}`;
      await keyValue.open(bucket, { maxAgeMs: 60_000 });
      const kv = await keyValue.open(bucket, { maxAgeMs: 1_000 });
      const key = `hold.${tenant()}.e1`;
      await kv.put(key, { status: 'PAUSED' });
      expect(await kv.get(key)).toMatchObject({ value: { status: 'PAUSED' } });
      await eventually(async () => expect(await kv.get(key)).toBeUndefined(), 5_000);
      const seen: KeyValueEntry[] = [];
      const watch = await kv.watch(`hold.>`, (entry) => void seen.push(entry));
      expect(seen).toEqual([]);
      await watch.unsubscribe();
    });

    it('writes a key only while it is at the revision the writer read (compare and set)', async () => {
      const { keyValue } = await open();
      const kv = await keyValue.open('svc_contract');
      const key = `ruleset.${tenant()}.v`;
      const first = await kv.putIf(key, { version: 1 }, null);
      expect(first).not.toBeNull();
      expect(await kv.putIf(key, { version: 9 }, null)).toBeNull();
      const second = await kv.putIf(key, { version: 2 }, first);
      expect(second).not.toBeNull();
      // A writer that read the first revision lost the race: its write is refused, not applied.
      expect(await kv.putIf(key, { version: 1 }, first)).toBeNull();
      expect(await kv.get(key)).toMatchObject({ value: { version: 2 }, revision: second });
      await kv.delete(key);
      expect(await kv.putIf(key, { version: 3 }, null)).not.toBeNull();
      expect(await kv.get(key)).toMatchObject({ value: { version: 3 } });
    });

    it('answers a request, carries a replier SvcError back, and times out without a responder', async () => {
      const { requests } = await open();
      const t = tenant();
      await requests.reply(`svc.${t}.*.request`, (data, subject) => {
        const { tokens } = data as { tokens: number };
        if (tokens > 100) return Promise.reject(new SvcError('SVC-BUD-3001', 'budget exhausted', { budget_id: 'b1' }));
        return Promise.resolve({ granted: tokens, subject });
      });
      expect(await requests.request(`svc.${t}.leases.request`, { tokens: 40 }, 2_000)).toEqual({
        granted: 40,
        subject: `svc.${t}.leases.request`,
      });
      await expect(requests.request(`svc.${t}.leases.request`, { tokens: 400 }, 2_000)).rejects.toMatchObject({
        code: 'SVC-BUD-3001',
        details: { budget_id: 'b1' },
      });
      await expect(requests.request(`svc.${t}.leases.nobody`, {}, 300)).rejects.toMatchObject({ code: 'SVC-SYS-9001' });
    });

    it('delivers signals to current listeners by pattern', async () => {
      const { signals } = await open();
      const t = tenant();
      const got: Array<[string, unknown]> = [];
      const sub = await signals.subscribeSignals(
        `svc.${t}.signals.*`,
        (data, subject) => void got.push([subject, data]),
      );
      await signals.publishSignal(`svc.${t}.signals.terminate`, { envelope_id: 'e1' });
      await signals.publishSignal(`svc.${t}.other.terminate`, { envelope_id: 'e2' });
      await eventually(() => expect(got).toHaveLength(1));
      expect(got[0]).toEqual([`svc.${t}.signals.terminate`, { envelope_id: 'e1' }]);
      await sub.unsubscribe();
      await signals.publishSignal(`svc.${t}.signals.terminate`, { envelope_id: 'e3' });
      await sleep(100);
      expect(got).toHaveLength(1);
    });
  });
}
