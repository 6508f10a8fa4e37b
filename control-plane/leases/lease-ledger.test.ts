import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { LeaseRequestSchema } from '../../core/sync/contract.ts';
import { AuditLog } from '../audit/audit-log.ts';
import { Budgets } from '../budgets/budgets.ts';
import type { Caller } from '../caller.ts';
import { EffectDispatcher } from '../effects/dispatcher.ts';
import { WebhookSender } from '../effects/webhooks.ts';
import { Store } from '../store/store.ts';
import { LeaseLedger } from './lease-ledger.ts';

let store: Store;
let now: Date;
let budgets: Budgets;
let ledger: LeaseLedger;
const caller: Caller = { principal: { type: 'bootstrap', id: 'root', tenant_id: 't', scopes: new Set(['admin']), administrator: true }, tenant: 't', requestId: 'r' };

beforeEach(() => {
  store = new Store(mkdtempSync(join(tmpdir(), 'lease-')));
  now = new Date('2026-11-22T10:00:00Z');
  const clock = () => now;
  const log = pino({ level: 'silent' });
  const effects = new EffectDispatcher(createMemoryMessaging({ logger: log }).bus, new WebhookSender({ secret: undefined, maxAttempts: 1, timeoutMs: 100 }, log), log);
  budgets = new Budgets({ store, audit: new AuditLog(store, clock), effects, clock });
  ledger = new LeaseLedger(store, budgets, clock, 60_000);
});
afterEach(async () => store.close());

const request = (budgetId: string, holder: string, extra: Record<string, unknown> = {}) =>
  LeaseRequestSchema.parse({ tenant_id: 't', budget_id: budgetId, holder, want_tokens: 0, want_micros: 400_000, ...extra });

describe('LeaseLedger', () => {
  it('never leases out more than the budget has left, across holders', async () => {
    const budget = await budgets.create(caller, { name: 'b', type: 'cost', period: 'monthly', limits: { max_cost_usd: 1, max_tokens: null, max_executions: null, max_input_tokens: null, max_output_tokens: null, max_llm_calls: null, max_tool_calls: null } });
    const grants = ['a', 'b', 'c', 'd'].map((holder) => store.transaction(() => ledger.handle('t', request(budget.budget_id, holder))));
    expect(grants.map((g) => g.micros)).toEqual([400_000, 400_000, 200_000, 0]);
    expect(grants.reduce((sum, g) => sum + (g.micros ?? 0), 0)).toBe(1_000_000);
    expect(grants[0]!.tokens).toBeNull();
  });

  it('renews a lease from what was reported spent and returns it on release', async () => {
    const budget = await budgets.create(caller, { name: 'b', type: 'cost', period: 'monthly', limits: { max_cost_usd: 1, max_tokens: null, max_executions: null, max_input_tokens: null, max_output_tokens: null, max_llm_calls: null, max_tool_calls: null } });
    const first = store.transaction(() => ledger.handle('t', request(budget.budget_id, 'a')));
    const renewed = store.transaction(() => ledger.handle('t', request(budget.budget_id, 'a', { lease_id: first.lease_id, spent_micros: 300_000 })));
    expect(renewed.lease_id).toBe(first.lease_id);
    expect(renewed.micros).toBe(500_000);
    expect(ledger.outstanding('t', budget.budget_id).micros).toBe(500_000);
    store.transaction(() => ledger.handle('t', request(budget.budget_id, 'a', { lease_id: first.lease_id, release: true })));
    expect(ledger.outstanding('t', budget.budget_id).micros).toBe(0);
  });

  it('lets the slice of a holder that stopped renewing return to the budget', async () => {
    const budget = await budgets.create(caller, { name: 'b', type: 'cost', period: 'monthly', limits: { max_cost_usd: 1, max_tokens: null, max_executions: null, max_input_tokens: null, max_output_tokens: null, max_llm_calls: null, max_tool_calls: null } });
    store.transaction(() => ledger.handle('t', request(budget.budget_id, 'gone', { want_micros: 1_000_000 })));
    expect(store.transaction(() => ledger.handle('t', request(budget.budget_id, 'b'))).micros).toBe(0);
    now = new Date(now.getTime() + 61_000);
    expect(store.transaction(() => ledger.handle('t', request(budget.budget_id, 'b'))).micros).toBe(400_000);
  });

  it('grants nothing on an exhausted or unknown budget', async () => {
    const budget = await budgets.create(caller, { name: 'b', type: 'token', period: 'monthly', limits: { max_tokens: 10, max_cost_usd: null, max_executions: null, max_input_tokens: null, max_output_tokens: null, max_llm_calls: null, max_tool_calls: null } });
    store.transaction(() => budgets.save('t', { ...budget, usage: { ...budget.usage, tokens_input: 10 } }));
    const grant = store.transaction(() => ledger.handle('t', request(budget.budget_id, 'a', { want_tokens: 5 })));
    expect(grant).toMatchObject({ status: 'exhausted', tokens: 0 });
    expect(() => store.transaction(() => ledger.handle('t', request('nope', 'a')))).toThrow(/not found/);
  });
});
