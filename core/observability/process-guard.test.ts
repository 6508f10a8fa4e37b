import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { outcome, spawnOnFullDisk } from '../../test/fixtures/disk-full.ts';

const dir = mkdtempSync(join(tmpdir(), 'store-full-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FIXTURE = 'test/fixtures/store-writes-on-full-disk.ts';
const lines = (output: string) =>
  output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; metrics?: string; err?: { message: string } });

describe('the process guard of every main.ts', () => {
  it('survives the rejections a failing store raises (its own and LMDB’s), logging and counting them', async () => {
    const run = await outcome(spawnOnFullDisk(FIXTURE, [join(dir, 'a')], 1_000_000));
    const logged = lines(run.output);
    expect(logged.some((l) => l.msg === 'storage write failed' && l.err?.message.startsWith('Commit failed'))).toBe(
      true,
    );
    expect(logged.some((l) => l.msg.startsWith('unhandled promise rejection'))).toBe(true);
    const alive = logged.find((l) => l.msg === 'still running');
    expect(alive?.metrics).toMatch(/svc_process_unhandled_rejections_total [1-9]/);
    expect(run.code).toBe(0);
  });

  it('stops the process after an uncaught exception, running the graceful stop first (exit 1)', async () => {
    const run = await outcome(spawnOnFullDisk(FIXTURE, [join(dir, 'b'), 'throw'], 1_000_000));
    const logged = lines(run.output);
    const fatal = logged.find((l) => l.level === 60);
    expect(fatal?.msg).toBe('uncaught exception; stopping the process');
    expect(fatal?.err?.message).toMatch(/JSON/);
    expect(logged.some((l) => l.msg === 'graceful stop ran')).toBe(true);
    expect(run.code).toBe(1);
  });
});
