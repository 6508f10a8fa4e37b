import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { NO_LIMITS, currentPeriod, type Budget } from '../../core/domain/index.ts';
import type { Outbox } from '../../core/outbox/outbox.ts';
import { LeaseRequestSchema, type LeaseGrant, type LeaseRequest } from '../../core/sync/contract.ts';
import { AuditLog } from '../audit/audit-log.ts';
import { Budgets } from '../budgets/budgets.ts';
import type { Caller } from '../caller.ts';
import { EffectDispatcher } from '../effects/dispatcher.ts';
import { openPublicationOutbox } from '../effects/publication-outbox.ts';
import { WebhookTargets } from '../effects/webhook-targets.ts';
import { WebhookSender } from '../effects/webhooks.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import { LeaseLedger } from './lease-ledger.ts';

let dir: string;
let storage: LmdbStorage;
let outbox: Outbox;
let now: Date;
let budgets: Budgets;
let ledger: LeaseLedger;
const caller: Caller = {
  principal: { type: 'bootstrap', id: 'root', tenant_id: 't', scopes: new Set(['admin']), administrator: true },
  tenant: 't',
  requestId: 'r',
};

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lease-'));
  ({ storage } = await LmdbStorage.open({ path: dir }));
  now = new Date('2026-11-22T10:00:00Z');
  const clock = () => now;
  const log = pino({ level: 'silent' });
  outbox = openPublicationOutbox({
    storage,
    bus: createMemoryMessaging({ logger: log }).bus,
    registry: new Registry(),
    logger: log,
  });
  const targets = new WebhookTargets({ allowHttp: false, allowedHosts: '' });
  const effects = new EffectDispatcher({
    storage,
    outbox,
    webhooks: new WebhookSender({ secrets: () => Promise.resolve([]), targets, maxAttempts: 1, timeoutMs: 100 }, log),
    log,
  });
  budgets = new Budgets({
    storage,
    audit: new AuditLog(storage, clock),
    effects,
    clock,
    webhookUrlProblem: (url) => targets.problemWith(url),
  });
  ledger = new LeaseLedger(storage, clock, 60_000);
});
afterEach(async () => {
  await outbox.close();
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One lease request in a transaction of its own, as the lease responder makes it. */
const handle = (request: LeaseRequest): Promise<LeaseGrant> =>
  storage.withTransaction((tx) => ledger.handle(tx, 't', request));

const outstanding = async (budgetId: string) =>
  (await storage.read.leases.outstanding('t', budgetId, now.toISOString())).micros;

const unleased = async (budgetId: string) => (await ledger.unleased('t', (await budgets.find('t', budgetId))!)).micros;

async function applyUsageTokens(budget: Budget, tokens: number): Promise<void> {
  await storage.withTransaction((tx) =>
    tx.budgets.addUsage(
      't',
      budget.budget_id,
      { tokens_input: tokens, tokens_output: 0, cost_micros: 0, executions: 0, llm_calls: 0, tool_calls: 0 },
      currentPeriod(budget, now),
      'refuse',
      now.toISOString(),
    ),
  );
}

/** What the event processor does with a proxy's usage event: the budget's usage grows and the ledger learns it was applied. */
async function applyProxySpend(budgetId: string, micros: number): Promise<void> {
  await storage.withTransaction(async (tx) => {
    const stored = (await tx.budgets.get('t', budgetId))!;
    const delta = {
      tokens_input: 0,
      tokens_output: 0,
      cost_micros: micros,
      executions: 0,
      llm_calls: 1,
      tool_calls: 0,
    };
    const charged = await tx.budgets.addUsage(
      't',
      budgetId,
      delta,
      currentPeriod(stored, now),
      'saturate',
      now.toISOString(),
    );
    await tx.leases.addSpend('t', budgetId, charged!.usage.period_start, 'applied', { tokens: 0, micros });
  });
}

const request = (budgetId: string, holder: string, extra: Record<string, unknown> = {}) =>
  LeaseRequestSchema.parse({
    tenant_id: 't',
    budget_id: budgetId,
    holder,
    want_tokens: 0,
    want_micros: 400_000,
    ...extra,
  });

/** A monthly budget of one dollar, nothing else limited. */
const oneDollarBudget = () =>
  budgets.create(caller, {
    name: 'b',
    type: 'cost',
    period: 'monthly',
    limits: {
      max_cost_usd: 1,
      max_tokens: null,
      max_executions: null,
      max_input_tokens: null,
      max_output_tokens: null,
      max_llm_calls: null,
      max_tool_calls: null,
    },
  });

describe('LeaseLedger', () => {
  it("returns or replaces only the holder's own lease, whoever names its id", async () => {
    const budget = await oneDollarBudget();
    const first = await handle(request(budget.budget_id, 'p1', { want_micros: 800_000 }));
    expect(first).toMatchObject({ micros: 800_000, ttl_ms: 60_000 });
    await handle(request(budget.budget_id, 'p2', { lease_id: first.lease_id, release: true }));
    await handle(request(budget.budget_id, 'p2', { lease_id: first.lease_id, want_micros: 1 }));
    expect(await outstanding(budget.budget_id)).toBe(800_001);
    const third = await handle(request(budget.budget_id, 'p3', { want_micros: 1_000_000 }));
    expect(third.micros).toBe(199_999);
  });

  it('never leases out more than the budget has left, across holders', async () => {
    const budget = await oneDollarBudget();
    const grants: LeaseGrant[] = [];
    for (const holder of ['a', 'b', 'c', 'd']) grants.push(await handle(request(budget.budget_id, holder)));
    expect(grants.map((g) => g.micros)).toEqual([400_000, 400_000, 200_000, 0]);
    expect(grants.reduce((sum, g) => sum + (g.micros ?? 0), 0)).toBe(1_000_000);
    expect(grants[0]!.tokens).toBeNull();
  });

  it('renews a lease from what was reported spent and returns it on release', async () => {
    const budget = await oneDollarBudget();
    const first = await handle(request(budget.budget_id, 'a'));
    const renewed = await handle(request(budget.budget_id, 'a', { lease_id: first.lease_id, spent_micros: 300_000 }));
    expect(renewed.lease_id).toBe(first.lease_id);
    expect(renewed.micros).toBe(500_000);
    expect(await outstanding(budget.budget_id)).toBe(500_000);
    await handle(request(budget.budget_id, 'a', { lease_id: first.lease_id, release: true }));
    expect(await outstanding(budget.budget_id)).toBe(0);
  });

  it('holds back spend reported in a renewal until the event processor has applied it, so it is never leased twice', async () => {
    const budget = await oneDollarBudget();
    const [a, , c] = [
      await handle(request(budget.budget_id, 'a')),
      await handle(request(budget.budget_id, 'b')),
      await handle(request(budget.budget_id, 'c')),
    ];
    // a spent its whole 400k; the usage events have not been applied yet.
    const renewed = await handle(request(budget.budget_id, 'a', { lease_id: a.lease_id, spent_micros: 400_000 }));
    expect(renewed.micros).toBe(0);
    expect(await unleased(budget.budget_id)).toBe(0);
    // The processor applies them: still nothing to lease, and nothing held back twice.
    await applyProxySpend(budget.budget_id, 400_000);
    expect((await handle(request(budget.budget_id, 'a', { lease_id: a.lease_id }))).micros).toBe(0);
    // c returns its 200k unspent: exactly that becomes leasable again.
    await handle(request(budget.budget_id, 'c', { lease_id: c.lease_id, release: true }));
    expect((await handle(request(budget.budget_id, 'a', { lease_id: a.lease_id }))).micros).toBe(200_000);
  });

  it('does not hold back reported spend the processor applied before the renewal reported it', async () => {
    const budget = await oneDollarBudget();
    const a = await handle(request(budget.budget_id, 'a'));
    await applyProxySpend(budget.budget_id, 300_000);
    const renewed = await handle(request(budget.budget_id, 'a', { lease_id: a.lease_id, spent_micros: 300_000 }));
    // 100k left of the lease plus a new 400k out of the 600k neither spent nor leased.
    expect(renewed.micros).toBe(500_000);
    expect(await unleased(budget.budget_id)).toBe(200_000);
  });

  it('lets the slice of a holder that stopped renewing return to the budget', async () => {
    const budget = await oneDollarBudget();
    await handle(request(budget.budget_id, 'gone', { want_micros: 1_000_000 }));
    expect((await handle(request(budget.budget_id, 'b'))).micros).toBe(0);
    now = new Date(now.getTime() + 61_000);
    expect((await handle(request(budget.budget_id, 'b'))).micros).toBe(400_000);
  });

  it('grants nothing on an exhausted or unknown budget', async () => {
    const budget = await budgets.create(caller, {
      name: 'b',
      type: 'token',
      period: 'monthly',
      limits: { ...NO_LIMITS, max_tokens: 10 },
    });
    await applyUsageTokens(budget, 10);
    const grant = await handle(request(budget.budget_id, 'a', { want_tokens: 5 }));
    expect(grant).toMatchObject({ status: 'exhausted', tokens: 0 });
    await expect(handle(request('nope', 'a'))).rejects.toThrow(/not found/);
  });
});
