/**
 * The proxy's event writes: `llm.call`-sized events appended to the outbox on the proxy's own
 * store, one at a time and with many calls in flight, with the store flushed after every commit
 * (`proxy_fsync_interval_ms=0`) and on the default 100 ms interval. Prints appends per second and
 * events per LMDB commit. Then the publisher's own rate: the same events appended while it drains
 * them to a real nats-server (JetStream), timed until the outbox is empty.
 *
 *   node test/bench/outbox-append.ts [events=5000] [in flight=64]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { Bus } from '../../core/bus/bus.ts';
import { MemoryBus } from '../../core/bus/memory-bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import { Outbox } from '../../core/outbox/outbox.ts';
import { openProxyStore } from '../../proxy/store/index.ts';
import { startNatsServer } from '../harness/nats-server.ts';
import { callEvent as event } from './call-event.ts';

const total = Number(process.argv[2] ?? 5000);
const inFlight = Number(process.argv[3] ?? 64);
const quiet = { warn: () => undefined, error: () => undefined };

/** Appends `total` events, `concurrency` at a time, as that many calls would. */
async function appendAll(outbox: Outbox, concurrency: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) await outbox.append(event(next++));
    }),
  );
}

/** An outbox on a fresh proxy store in front of `bus`, as the sidecar builds it. */
function benchOutbox(bus: Bus, fsyncIntervalMs: number) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-outbox-'));
  const store = openProxyStore(dir, fsyncIntervalMs);
  const storage = new LmdbOutboxStorage(store);
  const outbox = new Outbox(
    { bus, storage, registry: new Registry(), metricPrefix: 'bench', logger: quiet },
    { maxEntries: total * 2 },
  );
  return {
    outbox,
    storage,
    close: async () => {
      await outbox.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function run(fsyncIntervalMs: number, concurrency: number): Promise<{ perSecond: number; perCommit: number }> {
  // The publisher drains to an in-process bus meanwhile, its removals committing beside the appends.
  const bus = new MemoryBus({ logger: quiet });
  const { outbox, storage, close } = benchOutbox(bus, fsyncIntervalMs);
  const started = process.hrtime.bigint();
  await appendAll(outbox, concurrency);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const commits = storage.groupCommits;
  await bus.close();
  await close();
  return { perSecond: total / seconds, perCommit: total / commits };
}

console.log(`node ${process.version}, ${total} events per run`);
console.log('| store flush | in flight | appends/s | events per commit |');
console.log('| --- | ---: | ---: | ---: |');
for (const interval of [0, 100]) {
  for (const concurrency of [1, inFlight]) {
    const { perSecond, perCommit } = await run(interval, concurrency);
    const label = interval === 0 ? 'every commit' : `every ${interval} ms`;
    console.log(`| ${label} | ${concurrency} | ${Math.round(perSecond)} | ${perCommit.toFixed(1)} |`);
  }
}

/** Events per second the publisher moves from the outbox to nats-server, appends running beside it. */
async function drainOverNats(): Promise<number> {
  const server = await startNatsServer();
  const messaging = await openNatsMessaging({ connection: { servers: server.url } }, quiet);
  const { outbox, close } = benchOutbox(messaging.bus, 100);
  const started = process.hrtime.bigint();
  await appendAll(outbox, inFlight);
  while ((await outbox.depth()) > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await close();
  await messaging.close();
  await server.stop();
  return total / seconds;
}

console.log(`\npublisher to nats-server, ${inFlight} appends in flight: ${Math.round(await drainOverNats())} events/s`);
