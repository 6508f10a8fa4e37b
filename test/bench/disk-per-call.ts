/**
 * Disk used per recorded call, scaled to a million calls:
 * - the proxy's store: `llm.call` events held in its outbox (as while NATS is unreachable; a
 *   delivered entry is removed and its pages are reused), and
 * - the control plane's store (LMDB or PostgreSQL): the same calls applied by the event processor
 *   (the event record with its indexes; budget and envelope rows are per budget and execution,
 *   not per call, and grow by nothing here).
 * Bytes are what the files hold on disk (allocated blocks) for LMDB, and the tables with their
 * indexes for PostgreSQL, before and after. Prints figures; not a test.
 *
 *   node test/bench/disk-per-call.ts [calls=20000] [envelopes=50] [--backend=lmdb|postgres]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import { openProxyStore } from '../../proxy/store/index.ts';
import { benchArguments, benchControlPlane, benchTenantBudget } from './bench-storage.ts';
import { callEvent } from './call-event.ts';

const { backend, args } = benchArguments();
const calls = Number(args[0] ?? 20_000);
const envelopes = Number(args[1] ?? 50);
const MILLION = 1_000_000;
const BATCH = 500;
const logger = pino({ level: 'silent' });

/** Bytes the files under `dir` occupy on disk. */
function diskBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? diskBytes(path) : statSync(path).blocks * 512;
  }
  return total;
}

function report(store: string, bytes: number): void {
  const perCall = bytes / calls;
  console.log(`| ${store} | ${calls} | ${Math.round(perCall)} | ${((perCall * MILLION) / 1024 ** 3).toFixed(2)} GiB |`);
}

async function proxyStore(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-disk-proxy-'));
  const store = openProxyStore(dir, 100);
  const outbox = new LmdbOutboxStorage(store);
  const before = diskBytes(dir);
  for (let i = 0; i < calls; i += BATCH)
    await outbox.append(Array.from({ length: Math.min(BATCH, calls - i) }, (_, j) => callEvent(i + j)));
  await store.close();
  report('proxy LMDB, outbox holding the calls', diskBytes(dir) - before);
  rmSync(dir, { recursive: true, force: true });
}

/** The control plane's tables with their indexes, in bytes. */
async function postgresBytes(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CHECKPOINT');
    const { rows } = await client.query<{ bytes: string }>(
      `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'`,
    );
    return Number(rows[0]!.bytes);
  } finally {
    await client.end();
  }
}

async function controlPlaneStore(): Promise<void> {
  const messaging = createMemoryMessaging({ logger });
  const { plane, config, close } = await benchControlPlane(backend, messaging, logger);
  const measure = () =>
    config.database_url === undefined
      ? Promise.resolve(diskBytes(config.data_dir))
      : postgresBytes(config.database_url);
  const budget = await benchTenantBudget(plane);
  const envelopeIds = Array.from({ length: envelopes }, () => randomUUID());
  // The first calls open the envelopes: what follows is what each further call adds.
  const publish = async (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const event = {
        ...callEvent(i).data,
        event_id: randomUUID(),
        envelope_id: envelopeIds[i % envelopes],
        budget_id: budget.budget_id,
      };
      await messaging.bus.publish(subjects.event('bench', 'llm.call'), event, { msgId: event.event_id });
    }
    while (plane.processor.stats.applied + plane.processor.stats.duplicates < to)
      await new Promise((r) => setTimeout(r, 5));
  };
  await publish(0, envelopes);
  const before = await measure();
  await publish(envelopes, envelopes + calls);
  report(`control plane ${backend === 'lmdb' ? 'LMDB' : 'PostgreSQL'}, events applied`, (await measure()) - before);
  await close();
  await messaging.close();
}

console.log(`node ${process.version}, ${calls} calls, scaled to ${MILLION} calls`);
console.log('| store | calls written | bytes per call | per million calls |');
console.log('| --- | ---: | ---: | ---: |');
await proxyStore();
await controlPlaneStore();
