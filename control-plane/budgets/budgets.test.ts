import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Budget } from '../../core/domain/index.ts';
import { aBudget } from '../../test/storage/records.ts';
import { AuditLog } from '../audit/audit-log.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import type { Repositories } from '../storage/storage.ts';
import { Budgets } from './budgets.ts';

let dir: string;
let storage: LmdbStorage;
let now: Date;
let budgets: Budgets;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'budgets-'));
  ({ storage } = await LmdbStorage.open({ path: dir }));
  now = new Date('2026-11-30T10:00:00Z');
  const clock = () => now;
  budgets = new Budgets({
    storage,
    audit: new AuditLog(storage, clock),
    // A reservation announces nothing itself: envelope creation does.
    effects: {} as EffectDispatcher,
    clock,
    webhookUrlProblem: () => null,
  });
});
afterEach(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The transaction, counting the reads of a budget made through it. */
function countingReads(tx: Repositories): { tx: Repositories; reads: () => number } {
  let reads = 0;
  const counted = new Proxy(tx.budgets, {
    get(target, name) {
      if (name === 'get') reads++;
      const member: unknown = Reflect.get(target, name);
      return typeof member === 'function' ? (member.bind(target) as unknown) : member;
    },
  });
  return { tx: { ...tx, budgets: counted }, reads: () => reads };
}

async function stored(budget: Budget): Promise<Budget> {
  await storage.withTransaction((tx) => tx.budgets.insert('t', budget));
  return (await budgets.find('t', budget.budget_id))!;
}

describe('execution reservation', () => {
  it('takes the period from the budget read before the transaction, reading it there only to count', async () => {
    const known = await stored(aBudget('t', { period: 'daily', created_at: '2026-11-01T00:00:00.000Z' }));
    const { reserved, reads } = await storage.withTransaction(async (tx) => {
      const counting = countingReads(tx);
      return {
        reserved: await budgets.reserveExecution(counting.tx, 't', known.budget_id, known),
        reads: counting.reads(),
      };
    });
    expect(reads).toBe(0);
    expect(reserved.usage.executions).toBe(1);
    expect((await budgets.find('t', known.budget_id))!.usage.executions).toBe(1);
  });

  it('counts in the current period with a budget read before another transaction rolled it over', async () => {
    const known = await stored(aBudget('t', { period: 'daily', created_at: '2026-11-01T00:00:00.000Z' }));
    await storage.withTransaction((tx) => budgets.reserveExecution(tx, 't', known.budget_id));
    now = new Date('2026-12-01T10:00:00Z');
    await storage.withTransaction((tx) => budgets.reserveExecution(tx, 't', known.budget_id));
    const reserved = await storage.withTransaction((tx) => budgets.reserveExecution(tx, 't', known.budget_id, known));
    expect(reserved.usage.period_start).toBe('2026-12-01T00:00:00.000Z');
    expect(reserved.usage.executions).toBe(2);
  });
});
