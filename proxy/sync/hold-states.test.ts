import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import type { EnvelopeStatus } from '../../core/domain/envelope.ts';
import { openProxyStore, type ProxyStore } from '../store/index.ts';
import { EnvelopeRegistry } from '../envelopes/envelope-registry.ts';
import { HoldStates } from './hold-states.ts';

const DAY = 86_400_000;
const quiet = { warn: () => undefined };
const hold = (envelope: string, status: EnvelopeStatus) => ({
  tenant_id: 'acme',
  envelope_id: envelope,
  execution_id: `exec-${envelope}`,
  status,
  reason: null,
  written_at: new Date().toISOString(),
});

const opened: Array<{ dir: string; store: ProxyStore }> = [];
function openStore(dir = mkdtempSync(join(tmpdir(), 'holds-'))): { dir: string; store: ProxyStore } {
  const entry = { dir, store: openProxyStore(dir, 0) };
  opened.push(entry);
  return entry;
}
const holdsOn = (store: ProxyStore['root'], maxEntries: number, now?: () => number) =>
  new HoldStates({ tenantId: 'acme', maxEntries, maxAgeMs: DAY, store, logger: quiet, ...(now ? { now } : {}) });

afterEach(async () => {
  for (const { dir, store } of opened.splice(0)) {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('HoldStates', () => {
  it('forgets the oldest ended envelopes first beyond its bound, paused ones only when nothing else is left', () => {
    const holds = holdsOn(openStore().store.root, 3);
    holds.apply(hold('p1', 'PAUSED'));
    holds.apply(hold('t1', 'TERMINATED'));
    holds.apply(hold('c1', 'COMPLETED'));
    holds.apply(hold('p2', 'PAUSED'));
    expect(holds.size).toBe(3);
    expect(holds.forEnvelope('t1')).toBeUndefined();
    expect(holds.forExecution('exec-c1', [])?.status).toBe('COMPLETED');
    holds.apply(hold('p3', 'PAUSED'));
    holds.apply(hold('p4', 'PAUSED'));
    expect(['p1', 'p2', 'p3', 'p4', 'c1'].map((e) => holds.forEnvelope(e)?.status ?? null)).toEqual([
      null,
      'PAUSED',
      'PAUSED',
      'PAUSED',
      null,
    ]);
  });

  it('lifts a hold on RUNNING and keeps what it holds across a restart of the proxy', async () => {
    const first = openStore();
    const holds = holdsOn(first.store.root, 10);
    holds.apply(hold('p1', 'PAUSED'));
    holds.apply(hold('t1', 'TERMINATED'));
    holds.apply(hold('r1', 'PAUSED'));
    holds.apply(hold('r1', 'RUNNING'));
    expect(holds.forEnvelope('r1')).toBeUndefined();
    expect(holds.forExecution('exec-r1', [])).toBeUndefined();
    await first.store.close();
    opened.splice(0);
    const again = openStore(first.dir);
    const now = Date.now();
    const restarted = holdsOn(again.store.root, 10, () => now);
    expect(restarted.size).toBe(2);
    expect(restarted.forEnvelope('p1')?.status).toBe('PAUSED');
    expect(restarted.forExecution('exec-t1', [])?.status).toBe('TERMINATED');
    // Older than the bucket keeps holds: not loaded, and gone from disk.
    restarted.apply({ ...hold('old', 'TERMINATED'), written_at: new Date(now - 2 * DAY).toISOString() });
    await again.store.root.flushed;
    const later = holdsOn(again.store.root, 10, () => now);
    expect(later.forEnvelope('old')).toBeUndefined();
    expect(later.size).toBe(2);
  });

  it('keeps an envelope ended here, by a signal or by the proxy, so a restart without NATS still refuses it', async () => {
    const first = openStore();
    const holds = holdsOn(first.store.root, 10);
    const registry = new EnvelopeRegistry({ defaultBudgetId: 'b', podExecutionId: 'pod', holds });
    const cut = registry.resolve({ 'x-svc-execution-id': 'over-budget' }).envelope;
    registry.end(cut.envelopeId, { status: 'BUDGET_EXCEEDED', reason: 'budget exhausted' });
    registry.endRemote('e-signalled', 'signalled', 'b', { status: 'TERMINATED', reason: 'operator stop' });
    await first.store.close();
    opened.splice(0);
    const again = openStore(first.dir);
    const restarted = holdsOn(again.store.root, 10);
    expect(restarted.forExecution('over-budget', ['b'])).toMatchObject({
      tenant_id: 'acme',
      envelope_id: cut.envelopeId,
      status: 'BUDGET_EXCEEDED',
      reason: 'budget exhausted',
    });
    expect(restarted.forEnvelope('e-signalled')).toMatchObject({ execution_id: 'signalled', status: 'TERMINATED' });
    const after = new EnvelopeRegistry({ defaultBudgetId: 'b', podExecutionId: 'pod', holds: restarted });
    expect(after.resolve({ 'x-svc-execution-id': 'signalled' }).envelope.ending?.status).toBe('TERMINATED');
  });

  it("finds an execution's hold on the budgets asked for only, or on a budget the hold does not name", () => {
    const holds = holdsOn(openStore().store.root, 10);
    const onBudget = (envelope: string, budget: string | null | undefined) => ({
      ...hold(envelope, 'TERMINATED'),
      execution_id: 'nightly-report',
      ...(budget === undefined ? {} : { budget_id: budget }),
    });
    holds.apply(onBudget('ours', 'team-a'));
    holds.apply(onBudget('theirs', 'team-b'));
    holds.apply(onBudget('unbudgeted', null));
    expect(holds.forExecution('nightly-report', ['team-a'])?.envelope_id).toBe('ours');
    expect(holds.forExecution('nightly-report', ['team-c', 'team-b'])?.envelope_id).toBe('theirs');
    expect(holds.forExecution('nightly-report', ['team-c'])).toBeUndefined();
    holds.apply(onBudget('ours', 'team-a'));
    holds.apply({ ...onBudget('ours', 'team-a'), status: 'RUNNING' });
    expect(holds.forExecution('nightly-report', ['team-a'])).toBeUndefined();
    expect(holds.forExecution('nightly-report', ['team-b'])?.envelope_id).toBe('theirs');
    // From a control plane that names no budget: held whatever the budget, as before.
    holds.apply(onBudget('older', undefined));
    expect(holds.forExecution('nightly-report', ['team-c'])?.envelope_id).toBe('older');
  });

  it('logs a hold it could not keep on disk, and holds it in memory all the same', async () => {
    const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
    // A store whose every write fails, as a full LMDB map or a broken disk makes it.
    const full = () => Promise.reject(new Error('MDB_MAP_FULL: Environment mapsize limit reached'));
    const failing = { openDB: () => ({ getRange: () => [], put: full, remove: full }) } as unknown as RootDatabase;
    const holds = new HoldStates({
      tenantId: 'acme',
      maxEntries: 10,
      maxAgeMs: DAY,
      store: failing,
      logger: { warn: (fields, message) => warnings.push({ fields, message }) },
    });
    holds.apply(hold('p1', 'PAUSED'));
    holds.apply(hold('p1', 'RUNNING'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(holds.size).toBe(0);
    expect(warnings).toEqual([
      {
        fields: { envelope_id: 'p1', status: 'PAUSED', err: 'MDB_MAP_FULL: Environment mapsize limit reached' },
        message: 'envelope hold not kept on disk: a restart without NATS would not know it',
      },
      {
        fields: { envelope_id: 'p1', err: 'MDB_MAP_FULL: Environment mapsize limit reached' },
        message: 'envelope hold not removed from disk',
      },
    ]);
  });
});
