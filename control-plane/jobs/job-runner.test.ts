import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/control-plane.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import type { Storage } from '../storage/storage.ts';
import { JobRunner, type Job } from './job-runner.ts';

const silent = pino({ level: 'silent' });
/** Long enough that a loaded machine still renews in time. */
const LEASE_TTL_MS = 900;
let dir: string;
let storage: LmdbStorage;
const runners: JobRunner[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'jobs-'));
  ({ storage } = await LmdbStorage.open({ path: dir, onCheckFailure: () => undefined }));
});
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop()));
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

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

function runner(holder: string, store: Storage = storage): JobRunner {
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

describe('background jobs of two replicas on one store', () => {
  it('run on one replica at a time, and move to the other when the holder stops', async () => {
    const runs: Run[] = [];
    const a = runner('replica-a');
    const b = runner('replica-b');
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

  it('move to another replica once the lease of one that lost the store expires, never running twice', async () => {
    const runs: Run[] = [];
    let cut = false;
    // The holder's view of the store: gone once `cut` (a replica that lost its database, or hangs).
    const severed: Storage = Object.create(storage) as Storage;
    severed.withTransaction = (fn) =>
      cut ? Promise.reject(new Error('connection lost')) : storage.withTransaction(fn);
    const a = runner('replica-a', severed);
    a.start([recordingJob(runs, 'replica-a', 60_000)]);
    await eventually(
      () => runs.length,
      (n) => n === 1,
    );
    const b = runner('replica-b');
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
  });
});
