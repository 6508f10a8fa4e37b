import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/control-plane.ts';
import { createTestDatabase, postgresReachable } from '../../test/harness/postgres.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import { PostgresStorage } from '../storage/postgres/postgres-storage.ts';
import type { Storage } from '../storage/storage.ts';
import { JobRunner, type Job } from './job-runner.ts';

const silent = pino({ level: 'silent' });
/** Long enough that a loaded machine still renews in time. */
const LEASE_TTL_MS = 900;
const runners: JobRunner[] = [];
const postgres = await postgresReachable();

/**
 * The store of each replica: LMDB serves one process, so both replicas share one storage; on
 * PostgreSQL each has its own pool on one database, as two processes do.
 */
interface Stores {
  of(replica: 'a' | 'b'): Storage;
  close(): Promise<void>;
}

async function lmdbStores(): Promise<Stores> {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-'));
  const { storage } = await LmdbStorage.open({ path: dir, onCheckFailure: () => undefined });
  return {
    of: () => storage,
    async close() {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresStores(): Promise<Stores> {
  const database = await createTestDatabase();
  const open = async () => (await PostgresStorage.open({ connectionString: database.url, poolSize: 2 })).storage;
  const a = await open();
  const b = await open();
  return {
    of: (replica) => (replica === 'a' ? a : b),
    async close() {
      await a.close();
      await b.close();
      await database.drop();
    },
  };
}

interface Run {
  holder: string;
  start: number;
  end: number | null;
}

/** A job that takes `ms` (or until it is aborted) and records who ran it when. */
function recordingJob(runs: Run[], holder: string, ms: number): Job {
  return {
    name: 'refresh',
    intervalMs: 5,
    async run(signal) {
      const run: Run = { holder, start: Date.now(), end: null };
      runs.push(run);
      await sleep(ms, undefined, { signal }).catch(() => undefined);
      run.end = Date.now();
    },
  };
}

function runner(holder: string, store: Storage): JobRunner {
  const started = new JobRunner({
    storage: store,
    holder,
    leaseTtlMs: LEASE_TTL_MS,
    clock: () => new Date(),
    logger: silent,
  });
  runners.push(started);
  return started;
}

/** No two runs of different holders overlap in time. */
function expectOneAtATime(runs: Run[]): void {
  const sorted = [...runs].sort((a, b) => a.start - b.start);
  for (let i = 1; i < sorted.length; i++) {
    const before = sorted[i - 1]!;
    expect(before.end, `run of ${before.holder} still going`).not.toBeNull();
    expect(sorted[i]!.start).toBeGreaterThanOrEqual(before.end!);
  }
}

const backends: [string, () => Promise<Stores>, boolean][] = [
  ['LMDB', lmdbStores, false],
  ['PostgreSQL', postgresStores, !postgres],
];

describe.each(backends)('background jobs of two replicas on one store (%s)', (_, openStores, skip) => {
  let stores: Stores;
  beforeEach(async () => {
    if (!skip) stores = await openStores();
  });
  afterEach(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop()));
    await stores?.close();
  });

  it.skipIf(skip)('run on one replica at a time, and move to the other when the holder stops', async () => {
    const runs: Run[] = [];
    const a = runner('replica-a', stores.of('a'));
    const b = runner('replica-b', stores.of('b'));
    a.start([recordingJob(runs, 'replica-a', 40)]);
    await eventually(
      () => runs.length,
      (n) => n >= 1,
    );
    b.start([recordingJob(runs, 'replica-b', 40)]);
    // Several lease lifetimes: the holder keeps renewing, the other never gets a turn.
    await sleep(2 * LEASE_TTL_MS);
    expect(new Set(runs.map((r) => r.holder))).toEqual(new Set(['replica-a']));
    expect(a.runs.get('refresh')).toBeGreaterThan(3);

    await a.stop();
    const handedOver = Date.now();
    await eventually(
      () => runs.filter((r) => r.holder === 'replica-b').length,
      (n) => n >= 2,
      5_000,
    );
    // Given up on stop: the other replica need not wait out the lease.
    expect(runs.find((r) => r.holder === 'replica-b')!.start - handedOver).toBeLessThan(LEASE_TTL_MS);
    await b.stop();
    expectOneAtATime(runs);
  });

  it.skipIf(skip)(
    'move to another replica once the lease of one that lost the store expires, never running twice',
    async () => {
      const runs: Run[] = [];
      let cut = false;
      // The holder's view of the store: gone once `cut` (a replica that lost its database, or hangs).
      const storage = stores.of('a');
      const severed: Storage = Object.create(storage) as Storage;
      severed.withTransaction = (fn) =>
        cut ? Promise.reject(new Error('connection lost')) : storage.withTransaction(fn);
      const a = runner('replica-a', severed);
      a.start([recordingJob(runs, 'replica-a', 60_000)]);
      await eventually(
        () => runs.length,
        (n) => n === 1,
      );
      const b = runner('replica-b', stores.of('b'));
      b.start([recordingJob(runs, 'replica-b', 60_000)]);
      await sleep(2 * LEASE_TTL_MS);
      expect(runs.map((r) => r.holder)).toEqual(['replica-a']);

      cut = true;
      const takeover = await eventually(
        () => runs.find((r) => r.holder === 'replica-b'),
        (r) => r !== undefined,
        5_000,
      );
      // The holder abandoned its run when it could not renew, before its lease ran out.
      expect(runs[0]!.end).not.toBeNull();
      expect(takeover!.start).toBeGreaterThanOrEqual(runs[0]!.end!);
      await b.stop();
      expectOneAtATime(runs);
    },
  );
});
