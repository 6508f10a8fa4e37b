import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { BusLogger } from '../../core/bus/bus.ts';
import { MemoryRequests } from '../../core/bus/memory-requests.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { ANNOUNCE_AFTER_MS, shareAuthFailures } from './auth-failure-announcements.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
/** 30 s into a wall-clock minute. */
const NOW = Date.parse('2026-01-01T10:00:30Z');

async function replicas(options: { connected?: () => boolean } = {}) {
  const signals = new MemoryRequests(quiet);
  const replica = () =>
    shareAuthFailures(3, { signals, connected: options.connected ?? (() => true), now: () => NOW, logger: quiet });
  return { signals, a: await replica(), b: await replica() };
}

const blocked = (limit: { check(address: string): void }, address: string) => {
  try {
    limit.check(address);
    return false;
  } catch {
    return true;
  }
};

describe('failed authentications announced to the other replicas', () => {
  it('has each replica count the failures the others made, and its own once', async () => {
    const { a, b } = await replicas();
    a.limit.fail('192.0.2.1');
    a.limit.fail('192.0.2.1');
    await sleep(ANNOUNCE_AFTER_MS * 3);
    expect(blocked(a.limit, '192.0.2.1')).toBe(false);
    expect(blocked(b.limit, '192.0.2.1')).toBe(false);
    b.limit.fail('192.0.2.1');
    expect(blocked(b.limit, '192.0.2.1')).toBe(true);
    await sleep(ANNOUNCE_AFTER_MS * 3);
    expect(blocked(a.limit, '192.0.2.1')).toBe(true);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('sends nothing while NATS is away, and what is pending when it stops', async () => {
    let connected = false;
    const { a, b } = await replicas({ connected: () => connected });
    for (let i = 0; i < 3; i++) a.limit.fail('192.0.2.3');
    await sleep(ANNOUNCE_AFTER_MS * 3);
    connected = true;
    expect(blocked(a.limit, '192.0.2.3')).toBe(true);
    expect(blocked(b.limit, '192.0.2.3')).toBe(false);

    for (let i = 0; i < 3; i++) a.limit.fail('192.0.2.2');
    await a.stop();
    expect(blocked(b.limit, '192.0.2.2')).toBe(true);
    await b.stop();
  });

  it('publishes nothing while checking a request, and one message for the failures of an interval', async () => {
    const signals = new MemoryRequests(quiet);
    const sent: unknown[] = [];
    await signals.subscribeSignals(subjects.authFailures, (data) => void sent.push(data));
    const shared = await shareAuthFailures(3, { signals, connected: () => true, now: () => NOW, logger: quiet });
    for (let i = 0; i < 1000; i++) shared.limit.check(`198.51.100.${i % 256}`);
    shared.limit.fail('192.0.2.6');
    shared.limit.fail('192.0.2.7');
    shared.limit.fail('192.0.2.6');
    expect(sent).toEqual([]);
    await sleep(ANNOUNCE_AFTER_MS * 3);
    expect(sent).toEqual([
      expect.objectContaining({
        minute: Math.floor(NOW / 60_000),
        failures: [
          { client: '192.0.2.6', count: 2 },
          { client: '192.0.2.7', count: 1 },
        ],
      }),
    ]);
    await shared.stop();
  });

  it('ignores an announcement that does not validate', async () => {
    const { signals, a } = await replicas();
    const minute = Math.floor(NOW / 60_000);
    const client = '192.0.2.4';
    const invalid = [
      { minute, failures: [{ client, count: 5 }] },
      { replica: 'other', minute, failures: [{ client, count: '5' }] },
      { replica: 'other', minute: String(minute), failures: [{ client, count: 5 }] },
      {
        replica: 'other',
        minute,
        failures: Array.from({ length: 1025 }, (_, i) => ({
          client: i === 0 ? client : `198.51.${i >> 8}.${i & 255}`,
          count: 5,
        })),
      },
    ];
    for (const payload of invalid) await signals.publishSignal(subjects.authFailures, payload);
    await signals.publishSignal(subjects.authFailures, {
      replica: 'other',
      minute,
      failures: [{ client: 'x'.repeat(65), count: 5 }],
    });
    await sleep(10);
    expect(blocked(a.limit, client)).toBe(false);
    expect(blocked(a.limit, 'x'.repeat(65))).toBe(false);
    await signals.publishSignal(subjects.authFailures, { replica: 'other', minute, failures: [{ client, count: 3 }] });
    await sleep(10);
    expect(blocked(a.limit, client)).toBe(true);
    await a.stop();
  });
});
