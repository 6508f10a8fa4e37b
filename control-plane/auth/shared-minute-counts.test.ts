import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { BusLogger } from '../../core/bus/bus.ts';
import { MemoryRequests } from '../../core/bus/memory-requests.ts';
import { minuteOf } from './minute-counts.ts';
import {
  ANNOUNCE_AFTER_MS,
  KEYS_PER_ANNOUNCEMENT,
  minuteCounts,
  sharedKey,
  type AnnouncementLoss,
  type CountedKind,
} from './shared-minute-counts.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const KIND: CountedKind = { subject: 'svc.system.test-counts', maxKeyChars: 64, capacity: 2000, label: 'things' };
/** One second into a wall-clock minute: a test's counts cannot see the minute turn under them. */
const EARLY = Date.parse('2026-01-01T10:00:01Z');
const MINUTE = minuteOf(EARLY);
/** Well past the announcement delay. */
const ANNOUNCED = ANNOUNCE_AFTER_MS * 3;

interface ReplicaOptions {
  signals: MemoryRequests;
  now?: () => number;
  connected?: () => boolean;
  lost?: Array<[string, AnnouncementLoss]>;
}

function replica(options: ReplicaOptions) {
  return minuteCounts(KIND, {
    signals: options.signals,
    connected: options.connected ?? (() => true),
    now: options.now ?? (() => EARLY),
    logger: quiet,
    lost: (subject, reason) => void options.lost?.push([subject, reason]),
  });
}

/** Every message published on the kind's subject. */
async function listen(signals: MemoryRequests) {
  const sent: unknown[] = [];
  await signals.subscribeSignals(KIND.subject, (data) => void sent.push(data));
  return sent;
}

describe('counts per minute shared between replicas', () => {
  it('has each replica count what the others counted, and its own once', async () => {
    const signals = new MemoryRequests(quiet);
    const [a, b] = await Promise.all([replica({ signals }), replica({ signals })]);
    a.add('k', MINUTE);
    a.add('k', MINUTE);
    expect(a.count('k', MINUTE)).toBe(2);
    expect(b.count('k', MINUTE)).toBe(0);
    await sleep(ANNOUNCED);
    expect(a.count('k', MINUTE)).toBe(2);
    expect(b.count('k', MINUTE)).toBe(2);
    b.add('k', MINUTE);
    await sleep(ANNOUNCED);
    expect([a.count('k', MINUTE), b.count('k', MINUTE)]).toEqual([3, 3]);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('publishes nothing while counting or reading, and one message for what an interval counted', async () => {
    const signals = new MemoryRequests(quiet);
    const sent = await listen(signals);
    const counts = await replica({ signals });
    for (let i = 0; i < 1000; i++) counts.count(`r${i}`, MINUTE);
    counts.add('x', MINUTE);
    counts.add('y', MINUTE);
    counts.add('x', MINUTE);
    expect(sent).toEqual([]);
    await sleep(ANNOUNCED);
    expect(sent).toEqual([
      {
        replica: expect.any(String) as unknown,
        minute: MINUTE,
        counts: [
          { key: 'x', count: 2 },
          { key: 'y', count: 1 },
        ],
      },
    ]);
    await counts.stop();
  });

  it('announces at once once an announcement names as many keys as it may', async () => {
    const signals = new MemoryRequests(quiet);
    const sent = (await listen(signals)) as Array<{ counts: unknown[] }>;
    const counts = await replica({ signals });
    for (let i = 0; i < KEYS_PER_ANNOUNCEMENT; i++) counts.add(`k${i}`, MINUTE);
    expect(sent.map((announcement) => announcement.counts.length)).toEqual([KEYS_PER_ANNOUNCEMENT]);
    await sleep(ANNOUNCED);
    expect(sent).toHaveLength(1);
    await counts.stop();
  });

  it('counts a key too long to announce under its digest on every replica, apart from any other key', async () => {
    const signals = new MemoryRequests(quiet);
    const sent = (await listen(signals)) as Array<{ counts: Array<{ key: string }> }>;
    const [a, b] = await Promise.all([replica({ signals }), replica({ signals })]);
    const long = 'k'.repeat(KIND.maxKeyChars + 1);
    const other = 'k'.repeat(KIND.maxKeyChars) + 'j';
    a.add(long, MINUTE);
    a.add(long, MINUTE);
    b.add(other, MINUTE);
    await sleep(ANNOUNCED);
    expect([a.count(long, MINUTE), b.count(long, MINUTE)]).toEqual([2, 2]);
    expect([a.count(other, MINUTE), b.count(other, MINUTE)]).toEqual([1, 1]);
    const announced = sent.flatMap((announcement) => announcement.counts.map(({ key }) => key));
    expect(announced).toEqual([sharedKey(long, KIND.maxKeyChars), sharedKey(other, KIND.maxKeyChars)]);
    for (const key of announced) expect(key.length).toBeLessThanOrEqual(KIND.maxKeyChars);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('sends nothing while NATS is away, telling of each announcement lost, and what is pending when it stops', async () => {
    const signals = new MemoryRequests(quiet);
    let connected = false;
    const lost: Array<[string, AnnouncementLoss]> = [];
    const a = await replica({ signals, connected: () => connected, lost });
    const b = await replica({ signals });
    a.add('away', MINUTE);
    await sleep(ANNOUNCED);
    connected = true;
    expect(lost).toEqual([[KIND.subject, 'not_sent']]);
    expect(b.count('away', MINUTE)).toBe(0);

    a.add('pending', MINUTE);
    await a.stop();
    expect(b.count('pending', MINUTE)).toBe(1);
    await b.stop();
  });

  it('tells of each announcement dropped on arrival while the handlers were busy', async () => {
    const signals = new MemoryRequests(quiet, { perTenant: 1, total: 1 });
    const lost: Array<[string, AnnouncementLoss]> = [];
    const counts = await replica({ signals, lost });
    const announcement = { replica: 'other', minute: MINUTE, counts: [{ key: 'k', count: 1 }] };
    // In one turn of the event loop, as a burst read from the socket arrives: the first takes the
    // only handler slot until the turn ends.
    void signals.publishSignal(KIND.subject, announcement);
    void signals.publishSignal(KIND.subject, announcement);
    await sleep(1);
    expect(counts.count('k', MINUTE)).toBe(1);
    expect(lost).toEqual([[KIND.subject, 'dropped']]);
    await counts.stop();
  });

  it('refuses an announcement that does not validate, telling of each', async () => {
    const signals = new MemoryRequests(quiet);
    const lost: Array<[string, AnnouncementLoss]> = [];
    const counts = await replica({ signals, lost });
    const invalid = [
      { minute: MINUTE, counts: [{ key: 'k', count: 5 }] },
      { replica: 'other', minute: MINUTE, counts: [{ key: 'k', count: '5' }] },
      { replica: 'other', minute: String(MINUTE), counts: [{ key: 'k', count: 5 }] },
      { replica: 'other', minute: MINUTE, counts: [{ key: 'k', count: 0 }] },
      { replica: 'other', minute: MINUTE, counts: [] },
      {
        replica: 'other',
        minute: MINUTE,
        counts: Array.from({ length: KEYS_PER_ANNOUNCEMENT + 1 }, (_, i) => ({
          key: i === 0 ? 'k' : `k${i}`,
          count: 5,
        })),
      },
      { replica: 'other', minute: MINUTE, counts: [{ key: 'k'.repeat(KIND.maxKeyChars + 1), count: 5 }] },
    ];
    for (const payload of invalid) await signals.publishSignal(KIND.subject, payload);
    await sleep(10);
    expect(lost).toEqual(invalid.map(() => [KIND.subject, 'refused']));
    expect(counts.count('k', MINUTE)).toBe(0);
    expect(counts.count('k'.repeat(KIND.maxKeyChars + 1), MINUTE)).toBe(0);
    await signals.publishSignal(KIND.subject, { replica: 'other', minute: MINUTE, counts: [{ key: 'k', count: 3 }] });
    await sleep(10);
    expect(counts.count('k', MINUTE)).toBe(3);
    await counts.stop();
  });

  it('announces a minute apart from the next, and counts a replica running ahead in the minute it names', async () => {
    const signals = new MemoryRequests(quiet);
    const sent = (await listen(signals)) as Array<{ minute: number }>;
    let aheadNow = EARLY;
    let behindNow = EARLY;
    const ahead = await replica({ signals, now: () => aheadNow });
    const behind = await replica({ signals, now: () => behindNow });
    ahead.add('k', MINUTE);
    // Its minute turns before the announcement went: what was counted goes out under its minute.
    aheadNow += 60_000;
    ahead.add('k', MINUTE + 1);
    expect(sent.map((announcement) => announcement.minute)).toEqual([MINUTE]);
    await sleep(ANNOUNCED);
    expect(sent.map((announcement) => announcement.minute)).toEqual([MINUTE, MINUTE + 1]);
    // The other replica, a moment behind, counts the next minute's when its own turns.
    expect(behind.count('k', MINUTE)).toBe(1);
    behindNow += 60_000;
    expect(behind.count('k', MINUTE + 1)).toBe(1);
    // And nothing of a minute that passed.
    await signals.publishSignal(KIND.subject, { replica: 'other', minute: MINUTE, counts: [{ key: 'k', count: 9 }] });
    await sleep(10);
    expect(behind.count('k', MINUTE + 1)).toBe(1);
    await Promise.all([ahead.stop(), behind.stop()]);
  });
});
