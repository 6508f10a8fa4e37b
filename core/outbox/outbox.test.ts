import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Bus, BusLogger } from '../bus/bus.ts';
import { MemoryBus } from '../bus/memory-bus.ts';
import { SvcError } from '../errors/index.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { LmdbOutboxStorage } from './lmdb-outbox-storage.ts';
import { eventSize, type OutboxEvent, type OutboxStorage } from './outbox-storage.ts';
import { Outbox, type OutboxOptions } from './outbox.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };

/** A bus in front of the in-process one that fails while `down` is set, and records what it took. */
function flakyBus(): { bus: Bus; accepted: string[]; attempts: () => number; setDown(down: boolean): void } {
  const inner = new MemoryBus({ logger: quiet });
  const accepted: string[] = [];
  let down = false;
  let attempts = 0;
  const bus: Bus = {
    publish: async (subject, data, options) => {
      attempts++;
      if (down) throw new SvcError('SVC-EVT-4001', 'bus unreachable');
      await inner.publish(subject, data, options);
      accepted.push(options?.msgId ?? '');
    },
    subscribe: (...args) => inner.subscribe(...args),
    consumeBatches: (...args) => inner.consumeBatches(...args),
    close: () => inner.close(),
    healthy: () => !down,
    redeliverableForMs: () => inner.redeliverableForMs(),
  };
  return { bus, accepted, attempts: () => attempts, setDown: (value) => void (down = value) };
}

async function metric(registry: Registry, name: string): Promise<number> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return Number(found?.values[0]?.value ?? Number.NaN);
}

const event = (n: number) => ({ id: `evt-${n}`, subject: 'svc.acme.events.llm.call', data: { n } });
const fast: OutboxOptions = { initialBackoffMs: 5, maxBackoffMs: 20 };

describe('Outbox', () => {
  let dir: string;
  const opened: Outbox[] = [];
  function outbox(bus: Bus, options: OutboxOptions = fast, registry = new Registry()): Outbox {
    const box = new Outbox(
      {
        bus,
        storage: new LmdbOutboxStorage({ path: dir }),
        registry,
        metricPrefix: 'svc_proxy_outbox',
        logger: quiet,
      },
      options,
    );
    opened.push(box);
    return box;
  }
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-outbox-'));
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((box) => box.close()));
    await rm(dir, { recursive: true, force: true });
  });

  it('publishes in a later turn of the event loop, so what awaits an append runs first', async () => {
    // An answer waits for its event's append; the publisher must not run (and commit the
    // removal) between the append and that answer.
    const flaky = flakyBus();
    const box = outbox(flaky.bus);
    await box.flush(2_000);
    await box.append(event(1));
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(flaky.attempts()).toBe(0);
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1']);
  });

  it('with a publish delay, sends what was appended within it in one claim, and closes without waiting it out', async () => {
    const flaky = flakyBus();
    const storage = new LmdbOutboxStorage({ path: dir });
    /** How many events each claim handed out. */
    const claims: number[] = [];
    const counted: OutboxStorage = {
      depth: () => storage.depth(),
      append: (events) => storage.append(events),
      claim: async (limit) => {
        const claim = await storage.claim(limit);
        claims.push(claim.entries.length);
        return claim;
      },
      close: () => storage.close(),
    };
    const box = new Outbox(
      { bus: flaky.bus, storage: counted, registry: new Registry(), metricPrefix: 'svc_proxy_outbox', logger: quiet },
      { ...fast, pollMs: 60_000, publishDelayMs: 1_000 },
    );
    opened.push(box);
    // The first claim, at start, finds nothing.
    await eventually(
      () => claims.length,
      (n) => n === 1,
    );
    await box.append(event(1));
    await sleep(100);
    await box.append(event(2));
    await sleep(100);
    expect(flaky.attempts()).toBe(0);
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-2']);
    expect(claims.filter((n) => n > 0)).toEqual([2]);

    await box.append(event(3));
    const closing = performance.now();
    await box.close();
    expect(performance.now() - closing).toBeLessThan(500);
    expect(flaky.attempts()).toBe(2);
  });

  it('publishes appended events in order with the event id as msgId, and counts them', async () => {
    const flaky = flakyBus();
    const registry = new Registry();
    const box = outbox(flaky.bus, fast, registry);
    for (let n = 1; n <= 5; n++) await box.append(event(n));
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-2', 'evt-3', 'evt-4', 'evt-5']);
    expect(await box.depth()).toBe(0);
    expect(await metric(registry, 'svc_proxy_outbox_published_total')).toBe(5);
    expect(await metric(registry, 'svc_proxy_outbox_depth')).toBe(0);
  });

  it("hands the bus each event's payload as the JSON text its admission made, which subscribers read", async () => {
    const inner = new MemoryBus({ logger: quiet });
    const texts: (string | undefined)[] = [];
    const bus: Bus = {
      publish: (subject, data, options) => {
        texts.push(options?.json);
        return inner.publish(subject, data, options);
      },
      subscribe: (...args) => inner.subscribe(...args),
      consumeBatches: (...args) => inner.consumeBatches(...args),
      close: () => inner.close(),
      healthy: () => true,
      redeliverableForMs: () => inner.redeliverableForMs(),
    };
    const received: unknown[] = [];
    await inner.subscribe('svc.acme.events.>', (message) => {
      received.push(message.data);
      return Promise.resolve();
    });
    const box = outbox(bus);
    await box.append({ id: 'evt-1', subject: 'svc.acme.events.llm.call', data: { n: 1, model: 'gpt-4o' } });
    await box.flush(2_000);
    expect(texts).toEqual(['{"n":1,"model":"gpt-4o"}']);
    await eventually(
      () => received.length,
      (n) => n === 1,
    );
    expect(received).toEqual([{ n: 1, model: 'gpt-4o' }]);
  });

  it("sends a claim's events together, not one round trip each, and in order", async () => {
    const flaky = flakyBus();
    let inFlight = 0;
    let most = 0;
    const bus: Bus = {
      ...flaky.bus,
      publish: async (subject, data, options) => {
        most = Math.max(most, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight--;
        await flaky.bus.publish(subject, data, options);
      },
    };
    const box = outbox(bus);
    await Promise.all(Array.from({ length: 20 }, (_, n) => box.append(event(n + 1))));
    await box.flush(2_000);
    expect(most).toBeGreaterThanOrEqual(10);
    expect(flaky.accepted).toEqual(Array.from({ length: 20 }, (_, n) => `evt-${n + 1}`));
  });

  it('settles only what the bus took before a failure; the rest goes again and the stream keeps one of each', async () => {
    const flaky = flakyBus();
    const attempts = new Map<string, number>();
    let refused = false;
    const bus: Bus = {
      ...flaky.bus,
      publish: (subject, data, options) => {
        const id = options?.msgId ?? '';
        attempts.set(id, (attempts.get(id) ?? 0) + 1);
        if (id !== 'evt-3' || refused) return flaky.bus.publish(subject, data, options);
        refused = true;
        return Promise.reject(new SvcError('SVC-EVT-4001', 'no stream leader'));
      },
    };
    const box = outbox(bus);
    await Promise.all(Array.from({ length: 5 }, (_, n) => box.append(event(n + 1))));
    await box.flush(2_000);
    // The two before the failure were settled; the failed one and the two after it went again.
    expect(Object.fromEntries(attempts)).toEqual({ 'evt-1': 1, 'evt-2': 1, 'evt-3': 2, 'evt-4': 2, 'evt-5': 2 });
    const stored: string[] = [];
    const sub = await flaky.bus.subscribe('svc.acme.events.>', (m) => Promise.resolve(void stored.push(m.msgId)), {
      durable: 'check',
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sub.unsubscribe();
    expect([...stored].sort()).toEqual(['evt-1', 'evt-2', 'evt-3', 'evt-4', 'evt-5']);
  });

  it('keeps events while the bus fails, backs off, and sends them in order once it is back', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const registry = new Registry();
    const box = outbox(flaky.bus, fast, registry);
    for (let n = 1; n <= 4; n++) await box.append(event(n));
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await box.depth()).toBe(4);
    expect(await metric(registry, 'svc_proxy_outbox_depth')).toBe(4);
    // backoff: far fewer attempts than a busy loop would make in 150 ms
    expect(flaky.attempts()).toBeGreaterThan(1);
    expect(flaky.attempts()).toBeLessThan(30);
    flaky.setDown(false);
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-2', 'evt-3', 'evt-4']);
  });

  it('replays within a moment of the bus coming back, without waiting out a long backoff', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const box = outbox(flaky.bus, { initialBackoffMs: 60_000, maxBackoffMs: 60_000 });
    await box.append(event(1));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(flaky.attempts()).toBe(1);
    flaky.setDown(false);
    const backAt = Date.now();
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1']);
    expect(Date.now() - backAt).toBeLessThan(1000);
  });

  it('refuses events beyond maxEntries with SVC-EVT-4001 and counts them as dropped', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const registry = new Registry();
    const box = outbox(flaky.bus, { ...fast, maxEntries: 3 }, registry);
    for (let n = 1; n <= 3; n++) await box.append(event(n));
    await expect(box.append(event(4))).rejects.toMatchObject({
      code: 'SVC-EVT-4001',
      details: { event_id: 'evt-4', max_entries: 3 },
    });
    expect(await metric(registry, 'svc_proxy_outbox_dropped_total')).toBe(1);
    expect(await box.depth()).toBe(3);
    flaky.setDown(false);
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-2', 'evt-3']);
  });

  it('holds room for events to come: counted against the bounds, taken by the append that names it, given back on release', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const box = outbox(flaky.bus, { ...fast, maxEntries: 3, maxBytes: 10_000 });
    await box.append(event(1));
    const first = await box.reserveRoom(1, 1_000);
    const second = await box.reserveRoom(1, 1_000);
    expect(first).not.toBeNull();
    expect(second).not.toBeNull();
    // One event held and two promised: nothing more fits, neither a room nor an append without one.
    expect(await box.reserveRoom(1, 1)).toBeNull();
    await expect(box.append(event(2))).rejects.toMatchObject({ code: 'SVC-EVT-4001' });
    // An append into its room fits, and takes it: the outbox is then exactly full.
    await box.append(event(3), first!);
    expect(await box.depth()).toBe(2);
    expect(await box.reserveRoom(1, 1)).toBeNull();
    // A room given back (a call that charged nothing) is free again, once only.
    second!.release();
    second!.release();
    const third = await box.reserveRoom(1, 1_000);
    expect(third).not.toBeNull();
    expect(await box.reserveRoom(1, 1)).toBeNull();
    // An event refused before it was counted gives its room back all the same.
    await expect(box.append({ id: '', subject: 'svc.acme.events.llm.call', data: {} }, third!)).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
    });
    expect(await box.reserveRoom(1, 1_000)).not.toBeNull();
    // Room is counted in bytes as well.
    expect(await box.reserveRoom(0, 9_000)).toBeNull();
  });

  it('refuses events beyond maxBytes', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const box = outbox(flaky.bus, { ...fast, maxBytes: 200 });
    await box.append({ ...event(1), data: { text: 'x'.repeat(100) } });
    await expect(box.append({ ...event(2), data: { text: 'x'.repeat(100) } })).rejects.toMatchObject({
      code: 'SVC-EVT-4001',
    });
  });

  it('refuses an event above maxEventBytes as terminal SVC-SYS-9009, without counting it as dropped', async () => {
    const flaky = flakyBus();
    const registry = new Registry();
    const box = outbox(flaky.bus, { ...fast, maxEventBytes: 100 }, registry);
    await expect(box.append({ ...event(1), data: { text: 'x'.repeat(200) } })).rejects.toMatchObject({
      code: 'SVC-SYS-9009',
      fieldViolations: [{ field: 'data' }],
    });
    expect(await box.depth()).toBe(0);
    expect(await metric(registry, 'svc_proxy_outbox_dropped_total')).toBe(0);
  });

  it('sends what was pending at a crash exactly once after reopening, and continues the sequence', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const first = outbox(flaky.bus);
    for (let n = 1; n <= 3; n++) await first.append(event(n));
    await first.close();

    flaky.setDown(false);
    const second = outbox(flaky.bus);
    expect(await second.depth()).toBe(3);
    await second.append(event(4));
    await second.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-2', 'evt-3', 'evt-4']);
    await second.close();

    const third = outbox(flaky.bus);
    expect(await third.depth()).toBe(0);
  });

  it('rejects an invalid event naming the field and writes nothing', async () => {
    const flaky = flakyBus();
    flaky.setDown(true);
    const box = outbox(flaky.bus);
    await expect(box.append({ id: '', subject: 'svc.acme.events.llm.call', data: {} })).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'id' }],
    });
    await expect(box.append({ id: 'e', subject: 'svc.acme.leases.x', data: {} })).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'subject' }],
    });
    expect(await box.depth()).toBe(0);
  });

  it('drops an event the bus refuses as invalid instead of blocking the ones behind it', async () => {
    const flaky = flakyBus();
    const registry = new Registry();
    const bus: Bus = {
      ...flaky.bus,
      publish: (subject, data, options) =>
        options?.msgId === 'evt-2'
          ? Promise.reject(new SvcError('SVC-EVT-4002', 'invalid'))
          : flaky.bus.publish(subject, data, options),
    };
    const box = outbox(bus, fast, registry);
    for (let n = 1; n <= 3; n++) await box.append(event(n));
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-3']);
    expect(await metric(registry, 'svc_proxy_outbox_dropped_total')).toBe(1);
  });

  it('leaves a store passed in open on close', async () => {
    const root = open({ path: join(dir, 'shared') });
    const flaky = flakyBus();
    flaky.setDown(true);
    const box = new Outbox({
      bus: flaky.bus,
      storage: new LmdbOutboxStorage({ root, synced: true }),
      registry: new Registry(),
      metricPrefix: 'svc_proxy_outbox',
      logger: quiet,
    });
    await box.append(event(1));
    await box.close();
    await expect(box.append(event(2))).rejects.toMatchObject({ code: 'SVC-EVT-4001' });
    expect(root.openDB({ name: 'outbox', encoding: 'msgpack' }).getCount()).toBe(1);
    await root.put('still', 'open');
    expect(root.get('still')).toBe('open');
    await root.close();
  });

  it('stages events inside the caller transaction: they commit with it, roll back with it, and go out in commit order', async () => {
    const root = open({ path: join(dir, 'shared') });
    const data = root.openDB<number, string>({ name: 'data' });
    const storage = new LmdbOutboxStorage({ root, synced: true });
    const flaky = flakyBus();
    flaky.setDown(true);
    const registry = new Registry();
    const box = new Outbox(
      { bus: flaky.bus, storage, registry, metricPrefix: 'svc_outbox', logger: quiet },
      { ...fast, maxEntries: 3 },
    );
    // What a storage transaction does: validate and bound the events first, then write them with
    // the change in one synchronous LMDB transaction.
    const change = async (n: number, fail: boolean): Promise<void> => {
      let staged: OutboxEvent[] = [];
      await box.stage([event(n)], (events) => {
        staged = events;
        return Promise.resolve();
      });
      let committed = (): void => undefined;
      root.transactionSync(() => {
        data.putSync(`record-${n}`, n);
        committed = storage.appendInTransaction(staged);
        if (fail) throw new Error('the change failed after its event was staged');
      });
      committed();
      box.notify();
    };
    await change(1, false);
    await expect(change(2, true)).rejects.toThrow('the change failed');
    await change(3, false);
    expect(data.get('record-2')).toBeUndefined();
    expect(await box.depth()).toBe(2);
    expect(await metric(registry, 'svc_outbox_depth')).toBe(2);
    await change(4, false);
    // Full: the change is refused whole, its record as well as its event.
    await expect(change(5, false)).rejects.toMatchObject({ code: 'SVC-EVT-4001' });
    expect(data.get('record-5')).toBeUndefined();
    flaky.setDown(false);
    await box.flush(2_000);
    expect(flaky.accepted).toEqual(['evt-1', 'evt-3', 'evt-4']);
    await box.close();
    await root.close();
  });

  it('hands each event to one claim at a time and gives back what a claim did not settle', async () => {
    const storage = new LmdbOutboxStorage({ path: join(dir, 'claims') });
    await storage.append([event(1), event(2), event(3)]);
    const first = await storage.claim(2);
    const second = await storage.claim(2);
    expect(first.entries.map((e) => e.event.id)).toEqual(['evt-1', 'evt-2']);
    expect(second.entries.map((e) => e.event.id)).toEqual(['evt-3']);
    await first.settle([first.entries[0]!.key]);
    await second.settle([]);
    expect((await storage.claim(10)).entries.map((e) => e.event.id)).toEqual(['evt-2', 'evt-3']);
    expect(await storage.depth()).toEqual({
      entries: 2,
      bytes: eventSize(event(2)) + eventSize(event(3)),
    });
    await storage.close();
  });
});
