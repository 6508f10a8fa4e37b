import { describe, expect, it } from 'vitest';
import { ControlPlaneMetrics } from './metrics.ts';

describe('control-plane metrics', () => {
  it('reads the budgets once for scrapes that come together, and again after a failed read', async () => {
    const metrics = new ControlPlaneMetrics();
    let reads = 0;
    let fail = false;
    metrics.reportBudgetSpend(async () => {
      reads++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (fail) throw new Error('store away');
      return [{ tenant_id: 'acme', budget_id: 'b1', usd: 0.5, limit_usd: 2 }];
    });
    const scrapes = await Promise.all(Array.from({ length: 20 }, () => metrics.render(true)));
    expect(reads).toBe(1);
    for (const text of scrapes) {
      expect(text).toContain('svc_budget_usage_dollars{tenant_id="acme",budget_id="b1"} 0.5');
      expect(text).toContain('svc_budget_limit_dollars{tenant_id="acme",budget_id="b1"} 2');
    }
    // Without the tenant series nothing is read at all.
    const open = await metrics.render(false);
    expect(open).not.toContain('svc_budget_');
    expect(reads).toBe(1);

    const failing = new ControlPlaneMetrics();
    reads = 0;
    fail = true;
    failing.reportBudgetSpend(() => {
      reads++;
      return fail ? Promise.reject(new Error('store away')) : Promise.resolve([]);
    });
    await expect(failing.render(true)).rejects.toThrow('store away');
    fail = false;
    await failing.render(true);
    expect(reads).toBe(2);
  });
});
