/**
 * The provisional event a cut answer writes before its error event goes out: how long the answer
 * waits for that write, while the outbox commits `llm.call` events beside it as fast as it can.
 * On the proxy's default store (an fsync interval, 100 ms) that is one synchronous commit, which
 * holds the event loop; with a flush per commit (interval 0), the commit on LMDB's writer thread
 * and its flush to disk, which the event loop does not wait on. Prints the write's p50, p99 and
 * p99.9 in milliseconds.
 *
 *   node test/bench/provisional-put.ts [puts=500] [fsync-interval-ms=100]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import { openProxyStore, ProvisionalEvents } from '../../proxy/store/index.ts';
import { callEvent } from './call-event.ts';

const puts = Number(process.argv[2] ?? 500);
const fsyncIntervalMs = Number(process.argv[3] ?? 100);
const dir = mkdtempSync(join(tmpdir(), 'provisional-put-'));
const store = openProxyStore(dir, fsyncIntervalMs);
const outbox = new LmdbOutboxStorage(store);
const provisional = new ProvisionalEvents(store);

let busy = true;
const beside = (async () => {
  for (let i = 0; busy; i += 20) await outbox.append(Array.from({ length: 20 }, (_, k) => callEvent(puts + i + k)));
})();

const ms: number[] = [];
for (let i = 0; i < puts; i++) {
  await new Promise((resolve) => setTimeout(resolve, 2));
  const start = process.hrtime.bigint();
  await provisional.put(callEvent(i));
  ms.push(Number(process.hrtime.bigint() - start) / 1e6);
}
busy = false;
await beside;
ms.sort((a, b) => a - b);
const at = (q: number) => (ms[Math.min(ms.length - 1, Math.floor(ms.length * q))] as number).toFixed(3);
console.log(
  `provisional write (fsync interval ${fsyncIntervalMs} ms): p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, p99.9 ${at(0.999)} ms (${puts} puts)`,
);
await outbox.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
