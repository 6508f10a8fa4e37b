import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate } from 'node:timers/promises';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SYSTEM_TENANT } from '../../core/domain/index.ts';
import { eventually } from '../../test/harness/control-plane.ts';
import { createTestDatabase, postgresReachable, type TestDatabase } from '../../test/harness/postgres.ts';
import { aBudget, aCheckpoint, aDetection, anAuditDraft, anEvent, at, NOW } from '../../test/storage/records.ts';
import { AuditLog } from '../audit/audit-log.ts';
import { JobRunner } from '../jobs/job-runner.ts';
import { ControlPlaneMetrics } from '../observability/metrics.ts';
import { VIOLATION_DEDUP_SCOPE } from '../processor/event-processor.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import { PostgresStorage } from '../storage/postgres/postgres-storage.ts';
import { collectPages } from '../storage/paging.ts';
import type { Storage } from '../storage/storage.ts';
import { RetentionSweep, type RetainedKind } from './retention-sweep.ts';

const DAY = 86_400_000;
const TENANT = 'acme';
const OLD = -40 * DAY;
const postgres = await postgresReachable();
/** An event stream that keeps messages a week, less than the retention: de-duplication records may go. */
const WEEK_STREAM = { redeliverableForMs: () => Promise.resolve(7 * DAY), onDedupKept: () => {} };

/** A lease of one token and 100 micros, expiring `expires` ms from NOW. */
const aLease = (budgetId: string, leaseId: string, expires: number) => ({
  lease_id: leaseId,
  holder: `h-${leaseId}`,
  budget_id: budgetId,
  tokens: 1,
  micros: 100,
  expires_at: at(expires),
});

interface Backend {
  storage: Storage;
  close(): Promise<void>;
}

async function lmdb(): Promise<Backend> {
  const dir = mkdtempSync(join(tmpdir(), 'retention-'));
  const { storage } = await LmdbStorage.open({ path: dir });
  return {
    storage,
    async close() {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function pg(): Promise<Backend> {
  const database: TestDatabase = await createTestDatabase();
  const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 4 });
  return {
    storage,
    async close() {
      await storage.close();
      await database.drop();
    },
  };
}

const backends: Array<[string, () => Promise<Backend>, boolean]> = [
  ['LMDB', lmdb, true],
  ['PostgreSQL', pg, postgres],
];

describe.each(backends)('retention on %s', (name, open, available) => {
  let backend: Backend;
  let storage: Storage;
  const removedSeen: Record<RetainedKind, number> = {
    events: 0,
    detections: 0,
    processed_messages: 0,
    leases: 0,
    lease_reports: 0,
    checkpoints: 0,
    execution_contexts: 0,
  };
  const sweep = (batchSize: number) =>
    new RetentionSweep({
      storage,
      days: 30,
      batchSize,
      clock: () => NOW,
      onRemoved: (kind, count) => (removedSeen[kind] += count),
      ...WEEK_STREAM,
    });

  beforeEach(async () => {
    if (!available) return;
    backend = await open();
    storage = backend.storage;
    for (const kind of Object.keys(removedSeen) as RetainedKind[]) removedSeen[kind] = 0;
    await storage.withTransaction((tx) => tx.tenants.create({ tenant_id: TENANT, name: 'Acme', created_at: at(OLD) }));
  });
  afterEach(async () => {
    if (available) await backend.close();
  });

  it.skipIf(!available)(
    'removes events, violation entries, expired leases and report numbers older than the retention, keeps the newer, and leaves budgets, spend and the audit chain as they were',
    async () => {
      const budget = aBudget(TENANT, { period: 'total' });
      const period = { start: budget.usage.period_start, end: budget.usage.period_end };
      const usage = {
        tokens_input: 10,
        tokens_output: 5,
        cost_micros: 100,
        executions: 0,
        llm_calls: 1,
        tool_calls: 0,
      };
      const old = Array.from({ length: 25 }, (_, i) => anEvent(TENANT, { received_at: at(OLD + i) }));
      const fresh = Array.from({ length: 5 }, (_, i) => anEvent(TENANT, { received_at: at(-DAY + i) }));
      const system = anEvent(SYSTEM_TENANT, { received_at: at(OLD) });
      await storage.withTransaction(async (tx) => {
        await tx.budgets.insert(TENANT, budget);
        await tx.leases.addSpend(TENANT, budget.budget_id, period.start, 'reported', { tokens: 30, micros: 3000 });
        await tx.events.insertNew(SYSTEM_TENANT, [system]);
      });
      // As the event processor records calls: each event with the budget's usage, in its transaction.
      for (const event of [...old, ...fresh])
        await storage.withTransaction(async (tx) => {
          await tx.events.insertNew(TENANT, [event]);
          await tx.budgets.addUsage(TENANT, budget.budget_id, usage, period, 'refuse', event.received_at);
          await tx.audit.append(TENANT, { ...anAuditDraft('policy.evaluate'), timestamp: event.received_at });
        });
      for (let i = 0; i < 7; i++)
        await storage.withTransaction((tx) =>
          tx.dedup.markProcessed(TENANT, VIOLATION_DEDUP_SCOPE, `old-${i}`, at(OLD)),
        );
      const detections = [OLD, OLD + 1, OLD + 2, -DAY].map((offset, i) =>
        aDetection(TENANT, { detection_id: `d-${i}`, recorded_at: at(offset) }),
      );
      for (const d of detections) await storage.withTransaction((tx) => tx.detections.insert(TENANT, d));
      // Leases expired long ago, lately, and live; a holder's report number counted long ago, another's lately.
      await storage.withTransaction(async (tx) => {
        for (const [leaseId, expires] of [
          ['gone', OLD],
          ['lately', -DAY],
          ['live', DAY],
        ] as const)
          await tx.leases.put(TENANT, aLease(budget.budget_id, leaseId, expires));
        await tx.leases.claimReport(TENANT, budget.budget_id, 'h-old', 4, at(OLD));
        await tx.leases.claimReport(TENANT, budget.budget_id, 'h-fresh', 9, at(-DAY));
      });
      const leasedBefore = await storage.read.leases.outstanding(TENANT, budget.budget_id, at());
      await storage.withTransaction(async (tx) => {
        await tx.dedup.markProcessed(TENANT, VIOLATION_DEDUP_SCOPE, 'fresh', at(-DAY));
        // Other scopes mark once-per-period work (an overrun alert), not redeliveries: kept.
        await tx.dedup.markProcessed(TENANT, 'oracle.overrun', 'b:total', at(OLD));
      });
      const budgetBefore = await storage.read.budgets.get(TENANT, budget.budget_id);
      const pendingBefore = await storage.read.leases.pendingSpend(TENANT, budget.budget_id, period.start);

      const removed = await sweep(4).runOnce(new AbortController().signal);

      expect(removed).toEqual({
        events: 26,
        detections: 3,
        processed_messages: 7,
        leases: 1,
        lease_reports: 1,
        checkpoints: 0,
        execution_contexts: 0,
      });
      expect(removedSeen).toEqual(removed);
      const kept = await storage.read.events.list(TENANT, {}, { pageSize: 100 });
      expect(kept.items.map((e) => e.event_id)).toEqual(fresh.map((e) => e.event_id).reverse());
      expect((await storage.read.events.list(SYSTEM_TENANT, {})).items).toEqual([]);
      expect((await storage.read.detections.list(TENANT, {})).items).toEqual([detections[3]]);
      expect(await storage.read.budgets.get(TENANT, budget.budget_id)).toEqual(budgetBefore);
      expect(budgetBefore?.usage).toMatchObject({ cost_micros: 3000, llm_calls: 30 });
      expect(await storage.read.leases.pendingSpend(TENANT, budget.budget_id, period.start)).toEqual(pendingBefore);
      expect(await new AuditLog(storage).verify(TENANT)).toEqual({
        valid: true,
        checked: 30,
        first_invalid_seq: null,
        reason: null,
      });
      expect(await storage.read.leases.get(TENANT, budget.budget_id, 'gone')).toBeUndefined();
      expect(await storage.read.leases.get(TENANT, budget.budget_id, 'lately')).toBeDefined();
      expect(await storage.read.leases.outstanding(TENANT, budget.budget_id, at())).toEqual(leasedBefore);
      expect(await storage.read.leases.reports(TENANT, budget.budget_id)).toEqual([
        { holder: 'h-fresh', seq: 9, counted_at: at(-DAY) },
      ]);
      // The kept number still refuses its report sent again; the removed one's holder starts afresh.
      const claim = (holder: string, seq: number) =>
        storage.withTransaction((tx) => tx.leases.claimReport(TENANT, budget.budget_id, holder, seq, at()));
      expect(await claim('h-fresh', 9)).toBe(false);
      expect(await claim('h-old', 4)).toBe(true);
      const firstAgain = (scope: string, id: string) =>
        storage.withTransaction((tx) => tx.dedup.markProcessed(TENANT, scope, id, at()));
      expect(await firstAgain(VIOLATION_DEDUP_SCOPE, 'old-3')).toBe(true);
      expect(await firstAgain(VIOLATION_DEDUP_SCOPE, 'fresh')).toBe(false);
      expect(await firstAgain('oracle.overrun', 'b:total')).toBe(false);
      // Nothing left to remove: a second sweep changes nothing.
      expect(await sweep(4).runOnce(new AbortController().signal)).toEqual({
        events: 0,
        detections: 0,
        processed_messages: 0,
        leases: 0,
        lease_reports: 0,
        checkpoints: 0,
        execution_contexts: 0,
      });
    },
  );

  it.skipIf(!available)(
    'walks leases and report numbers a batch at a time, however many live, and still removes every expired one',
    async () => {
      const budget = aBudget(TENANT, { period: 'total' });
      // Live leases and fresh report numbers sort before the expired and the old ones.
      await storage.withTransaction(async (tx) => {
        await tx.budgets.insert(TENANT, budget);
        for (let i = 0; i < 30; i++) {
          await tx.leases.put(TENANT, aLease(budget.budget_id, `a-${String(i).padStart(2, '0')}`, DAY));
          await tx.leases.claimReport(TENANT, budget.budget_id, `a-${String(i).padStart(2, '0')}`, 1, at(-DAY));
        }
        for (const id of ['z-1', 'z-2', 'z-3']) {
          await tx.leases.put(TENANT, aLease(budget.budget_id, id, OLD));
          await tx.leases.claimReport(TENANT, budget.budget_id, id, 1, at(OLD));
        }
      });
      const before = at(-30 * DAY);
      const first = await storage.withTransaction(async (tx) => ({
        leases: await tx.leases.removeExpiredBefore(TENANT, before, null, 10),
        reports: await tx.leases.removeReportsBefore(TENANT, before, null, 10),
      }));
      if (name === 'LMDB') {
        // No index by expiry: a slice looks at 10 records, none of them expired, and says where to go on.
        expect(first.leases).toEqual({ removed: 0, next: expect.any(String) });
        expect(first.reports).toEqual({ removed: 0, next: expect.any(String) });
      } else {
        // The expiry index finds the expired first; nothing is left to remove.
        expect(first.leases).toEqual({ removed: 3, next: null });
        expect(first.reports).toEqual({ removed: 3, next: null });
      }
      const swept = await sweep(10).runOnce(new AbortController().signal);
      const removedInAll = {
        leases: first.leases.removed + swept.leases,
        reports: first.reports.removed + swept.lease_reports,
      };
      expect(removedInAll).toEqual({ leases: 3, reports: 3 });
      expect(await storage.read.leases.get(TENANT, budget.budget_id, 'z-1')).toBeUndefined();
      expect(await storage.read.leases.get(TENANT, budget.budget_id, 'a-29')).toBeDefined();
      expect((await storage.read.leases.reports(TENANT, budget.budget_id)).map((r) => r.holder)).toHaveLength(30);
    },
  );

  it.skipIf(!available)(
    'removes checkpoints saved and contexts last updated before the retention; an execution left without checkpoints stops counting',
    async () => {
      const context = (executionId: string, offset: number) => ({
        execution_id: executionId,
        tenant_id: TENANT,
        values: { step: executionId },
        version: 1,
        updated_at: at(offset),
      });
      await storage.withTransaction(async (tx) => {
        for (let i = 0; i < 3; i++)
          await tx.checkpoints.insert(
            TENANT,
            aCheckpoint(TENANT, { execution_id: 'exec-old', checkpoint_id: 'old', created_at: at(OLD + i) }),
            'next',
          );
        for (const offset of [OLD, -DAY])
          await tx.checkpoints.insert(
            TENANT,
            aCheckpoint(TENANT, { execution_id: 'exec-mixed', checkpoint_id: 'mixed', created_at: at(offset) }),
            'next',
          );
        await tx.executionContexts.put(TENANT, context('ctx-old', OLD), 0);
        await tx.executionContexts.put(TENANT, context('ctx-fresh', -DAY), 0);
      });

      const removed = await sweep(2).runOnce(new AbortController().signal);

      expect(removed).toMatchObject({ checkpoints: 4, execution_contexts: 1 });
      expect(removedSeen).toEqual(removed);
      const versions = (executionId: string) =>
        collectPages((page) => storage.read.checkpoints.versions(TENANT, executionId, page));
      expect(await versions('exec-old')).toEqual([]);
      expect((await versions('exec-mixed')).map((c) => c.version)).toEqual([2]);
      expect(await storage.read.executionContexts.get(TENANT, 'ctx-old')).toBeUndefined();
      expect(await storage.read.executionContexts.get(TENANT, 'ctx-fresh')).toEqual(context('ctx-fresh', -DAY));
      // Only exec-mixed still counts: one more execution fits under a bound of 2, and exec-mixed
      // keeps its version counter.
      await storage.withTransaction(async (tx) => {
        expect(await tx.checkpoints.admitExecution(TENANT, 'exec-new', 2)).toBe(true);
        const next = await tx.checkpoints.insert(
          TENANT,
          aCheckpoint(TENANT, { execution_id: 'exec-mixed', checkpoint_id: 'mixed' }),
          'next',
        );
        expect(next.version).toBe(3);
      });
    },
  );

  it.skipIf(!available)('lets writes through while it sweeps a large backlog, one small batch at a time', async () => {
    const backlog = 20_000;
    for (let i = 0; i < backlog; i += 1000)
      await storage.withTransaction((tx) =>
        tx.events.insertNew(
          TENANT,
          Array.from({ length: 1000 }, (_, j) => anEvent(TENANT, { received_at: at(OLD + i + j) })),
        ),
      );
    let sweeping = true;
    const running = sweep(100)
      .runOnce(new AbortController().signal)
      .finally(() => (sweeping = false));
    const written: string[] = [];
    let writtenDuringSweep = 0;
    while (sweeping) {
      // Writes arrive as network I/O does, each in an event-loop turn of its own.
      await setImmediate();
      const event = anEvent(TENANT);
      await storage.withTransaction((tx) => tx.events.insertNew(TENANT, [event]));
      written.push(event.event_id);
      if (sweeping) writtenDuringSweep += 1;
    }
    expect(await running).toEqual({
      events: backlog,
      detections: 0,
      processed_messages: 0,
      leases: 0,
      lease_reports: 0,
      checkpoints: 0,
      execution_contexts: 0,
    });
    // The writer was never held up for the whole sweep: its transactions went in between batches.
    expect(writtenDuringSweep).toBeGreaterThanOrEqual(10);
    const kept = await collectPages((page) => storage.read.events.list(TENANT, {}, page));
    expect(kept.map((e) => e.event_id)).toEqual(written.reverse());
  });

  it.skipIf(!available)('runs as the retention job of the job runner, on the replica holding its lease', async () => {
    await storage.withTransaction((tx) =>
      tx.events.insertNew(TENANT, [anEvent(TENANT, { received_at: at(OLD) }), anEvent(TENANT)]),
    );
    const metrics = new ControlPlaneMetrics();
    const retention = new RetentionSweep({
      storage,
      days: 30,
      batchSize: 10,
      clock: () => NOW,
      onRemoved: (kind, count) => metrics.retentionRemoved.inc({ kind }, count),
      ...WEEK_STREAM,
    });
    const runner = new JobRunner({
      storage,
      holder: 'replica-1',
      leaseTtlMs: 3000,
      clock: () => new Date(),
      logger: pino({ level: 'silent' }),
    });
    runner.start([
      { name: 'retention', intervalMs: 60_000, run: (signal) => retention.runOnce(signal).then(() => {}) },
    ]);
    try {
      await eventually(
        () => runner.runs.get('retention'),
        (runs) => runs === 1,
        10_000,
      );
      expect((await storage.read.events.list(TENANT, {})).items).toHaveLength(1);
      const counter = await metrics.retentionRemoved.get();
      expect(counter.values).toEqual([{ labels: { kind: 'events' }, value: 1 }]);
      // Another replica does not get the job while this one holds its lease.
      expect(
        await storage.withTransaction((tx) => tx.jobs.tryAcquire('retention', 'replica-2', 3000, new Date())),
      ).toBe(false);
    } finally {
      await runner.stop();
    }
  });
});

describe('retention switched off', () => {
  it('removes nothing with 0 days', async () => {
    const backend = await lmdb();
    const { storage } = backend;
    try {
      await storage.withTransaction((tx) => tx.events.insertNew(TENANT, [anEvent(TENANT, { received_at: at(OLD) })]));
      await storage.withTransaction((tx) => tx.tenants.create({ tenant_id: TENANT, name: 'Acme', created_at: at() }));
      const sweep = new RetentionSweep({
        storage,
        days: 0,
        batchSize: 10,
        clock: () => NOW,
        onRemoved: () => {},
        ...WEEK_STREAM,
      });
      expect(await sweep.runOnce(new AbortController().signal)).toEqual({
        events: 0,
        detections: 0,
        processed_messages: 0,
        leases: 0,
        lease_reports: 0,
        checkpoints: 0,
        execution_contexts: 0,
      });
      expect((await storage.read.events.list(TENANT, {})).items).toHaveLength(1);
    } finally {
      await backend.close();
    }
  });
});
