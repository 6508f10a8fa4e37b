import { describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';

const fleet = useFleet({ tenants: { durable: { max_cost_usd: 1000 } } });
/** Concurrent clients: enough that transactions share commits (group commit on LMDB). */
const CLIENTS = 16;
const KILLS = 3;

describe('the control-plane process killed with SIGKILL while envelopes are being created', () => {
  it('keeps every envelope it answered 201 for, and counts each in its budget', async () => {
    const { cp } = fleet;
    const tenant = fleet.tenant('durable');
    const answered: string[] = [];
    let running = true;
    const client = async (): Promise<void> => {
      while (running) {
        try {
          const res = await cp.rest('POST', '/v1/envelopes', {
            tenant: tenant.tenantId,
            body: { budget_id: tenant.budgetId, adapter_type: 'custom' },
          });
          if (res.status === 201) answered.push(String((res.body as { envelope_id: string }).envelope_id));
        } catch {
          // Cut by the kill: no answer, so nothing is owed.
        }
      }
    };
    for (let kill = 0; kill < KILLS; kill++) {
      running = true;
      const before = answered.length;
      const clients = Array.from({ length: CLIENTS }, client);
      await eventually(
        () => answered.length,
        (n) => n > before + 200,
        30_000,
      );
      // Killed with requests in flight: some have committed writes they were never answered for.
      await cp.kill();
      running = false;
      await Promise.all(clients);
      await cp.start();
    }
    const owed = [...answered];

    const missing: string[] = [];
    for (const id of owed) {
      const res = await cp.rest('GET', `/v1/envelopes/${id}`, { tenant: tenant.tenantId });
      if (res.status !== 200) missing.push(`${id}: ${res.status}`);
    }
    expect(missing).toEqual([]);
    const budget = await cp.rest('GET', `/v1/budgets/${tenant.budgetId}`, { tenant: tenant.tenantId });
    expect(budget.status).toBe(200);
    // Each answered creation reserved its execution; those cut short may have too, never fewer.
    expect((budget.body as { usage: { executions: number } }).usage.executions).toBeGreaterThanOrEqual(owed.length);
  }, 120_000);
});
