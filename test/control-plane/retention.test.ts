import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../control-plane/audit/audit-log.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { NO_LIMITS } from '../../core/domain/index.ts';
import { eventually, startControlPlane, type RunningControlPlane } from '../harness/control-plane.ts';

const DAY = 86_400_000;
const TENANT = 'acme';
const CALLER = {
  principal: {
    type: 'bootstrap' as const,
    id: 'retention-test',
    tenant_id: 'system',
    scopes: new Set(['admin' as const]),
    administrator: true,
  },
  tenant: TENANT,
  requestId: 'retention-test',
};

let cp: RunningControlPlane | undefined;
afterEach(async () => {
  await cp?.close();
  cp = undefined;
});

describe('the retention job of a running control plane', () => {
  it('removes the usage events applied more than retention_days ago and counts them, leaving the budget and the audit chain whole', async () => {
    // The control plane's clock: 40 days back while the old calls are applied, then today.
    let now = Date.now() - 40 * DAY;
    cp = await startControlPlane(
      { retention_days: 30, retention_interval_seconds: 1, job_lease_ttl_seconds: 3 },
      undefined,
      undefined,
      () => new Date(now),
    );
    const { plane, messaging } = cp;
    await plane.storage.withTransaction((tx) =>
      plane.services.tenants.create(tx, { tenant_id: TENANT, name: TENANT, created_at: new Date(now).toISOString() }),
    );
    const budget = await plane.services.budgets.create(CALLER, {
      name: 'fleet',
      type: 'cost',
      period: 'total',
      limits: { ...NO_LIMITS, max_cost_usd: 1000 },
    });
    const call = async () => {
      const event = {
        event_id: randomUUID(),
        tenant_id: TENANT,
        envelope_id: 'env-1',
        budget_id: budget.budget_id,
        event_type: 'llm.call',
        timestamp: new Date(now).toISOString(),
        tokens: { input: 100, output: 20 },
        model: 'gpt-4o-mini',
        cost_usd: 0.01,
        payload: {},
        source: 'proxy:test',
      };
      await messaging.bus.publish(subjects.event(TENANT, 'llm.call'), event, { msgId: event.event_id });
      return event.event_id;
    };
    const applied = (calls: number) =>
      eventually(
        () => plane.storage.read.budgets.get(TENANT, budget.budget_id),
        (b) => b?.usage.llm_calls === calls,
        10_000,
      );

    for (let i = 0; i < 3; i++) await call();
    await applied(3);
    now = Date.now();
    const recent = [await call(), await call()];
    const spent = await applied(5);

    const kept = await eventually(
      () => plane.storage.read.events.list(TENANT, {}),
      (page) => page.items.length === 2,
      15_000,
      100,
    );
    expect(kept.items.map((e) => e.event_id)).toEqual(recent.reverse());
    expect(await plane.storage.read.budgets.get(TENANT, budget.budget_id)).toEqual(spent);
    expect(spent?.usage.cost_micros).toBe(50_000);
    // Counted once the removal's transaction resolves, which is after its commit became visible.
    const removed = await eventually(
      async () => (await plane.metrics.retentionRemoved.get()).values,
      (values) => values.length > 0,
    );
    expect(removed).toEqual([{ labels: { kind: 'events' }, value: 3 }]);
    expect(await new AuditLog(plane.storage).verify(TENANT)).toMatchObject({ valid: true, first_invalid_seq: null });
  }, 60_000);
});
