import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UNKNOWN_VALUE } from '../../core/policy/index.ts';
import { BudgetLimitsSchema } from '../../core/domain/index.ts';
import type { BudgetState } from '../../core/sync/contract.ts';
import { openProxyStore, type ProxyStore } from '../store/index.ts';
import { BudgetWorkflows } from './budget-workflows.ts';

const quiet = { warn: () => undefined };
const state = (budgetId: string, workflow?: string | null): BudgetState => ({
  tenant_id: 'acme',
  budget_id: budgetId,
  ...(workflow === undefined ? {} : { workflow_id: workflow }),
  status: 'active',
  limits: BudgetLimitsSchema.parse({}),
  period_start: '2026-12-01T00:00:00.000Z',
  period_end: null,
  used_tokens: 0,
  used_micros: 0,
  unleased_tokens: null,
  unleased_micros: null,
  updated_at: '2026-12-01T00:00:00.000Z',
});

const opened: Array<{ dir: string; store: ProxyStore }> = [];
function openStore(dir = mkdtempSync(join(tmpdir(), 'workflows-'))): { dir: string; store: ProxyStore } {
  const entry = { dir, store: openProxyStore(dir, 0) };
  opened.push(entry);
  return entry;
}

afterEach(async () => {
  for (const { dir, store } of opened.splice(0)) {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('BudgetWorkflows', () => {
  it("gives a budget's workflow once its state is heard, unknown before and once a state does not say", () => {
    const workflows = new BudgetWorkflows({ budgetIds: ['b1', 'b2'], store: openStore().store.root, logger: quiet });
    expect(workflows.of('b1')).toBe(UNKNOWN_VALUE);
    workflows.heard(state('b1', 'billing'));
    workflows.heard(state('b2', null));
    expect(workflows.of('b1')).toBe('billing');
    expect(workflows.of('b2')).toBeUndefined();
    workflows.heard(state('b1', 'support'));
    expect(workflows.of('b1')).toBe('support');
    // A control plane too old to say: the workflow may have changed since.
    workflows.heard(state('b1'));
    expect(workflows.of('b1')).toBe(UNKNOWN_VALUE);
  });

  it('keeps only the budgets the sidecar may charge: any other stays unknown', () => {
    const workflows = new BudgetWorkflows({ budgetIds: ['b1'], store: openStore().store.root, logger: quiet });
    workflows.heard(state('elsewhere', null));
    expect(workflows.of('elsewhere')).toBe(UNKNOWN_VALUE);
  });

  it('knows after a restart what it heard before, for the budgets it may still charge', async () => {
    const { dir, store } = openStore();
    const before = new BudgetWorkflows({ budgetIds: ['b1', 'b2', 'b3'], store: store.root, logger: quiet });
    before.heard(state('b1', 'billing'));
    before.heard(state('b2', null));
    before.heard(state('b3', 'ops'));
    await store.root.flushed;
    await store.close();
    opened.pop();
    const reopened = openStore(dir).store.root;
    const after = new BudgetWorkflows({ budgetIds: ['b1', 'b2'], store: reopened, logger: quiet });
    expect(after.of('b1')).toBe('billing');
    expect(after.of('b2')).toBeUndefined();
    expect(after.of('b3')).toBe(UNKNOWN_VALUE);
    await reopened.flushed;
    expect(reopened.openDB({ name: 'budget-workflows', encoding: 'json' }).get('b3')).toBeUndefined();
  });
});
