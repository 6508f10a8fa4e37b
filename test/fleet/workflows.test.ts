import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import type { FleetTenant, ProxyProcess } from '../harness/processes.ts';
import { chat } from './agent-calls.ts';

const fleet = useFleet({ tenants: { teams: { max_cost_usd: 100, max_tokens: 10_000_000 } } });
let tenant: FleetTenant;
let proxy: ProxyProcess;
let payroll: string;
let reports: string;

async function budget(workflow: string): Promise<string> {
  const created = await fleet.cp.rest('POST', '/v1/budgets', {
    tenant: 'teams',
    body: { name: workflow, type: 'cost', limits: { max_cost_usd: 100 }, workflow_id: workflow },
  });
  expect(created.status).toBe(201);
  return created.body.budget_id as string;
}

beforeAll(async () => {
  tenant = fleet.tenant('teams');
  payroll = await budget('payroll');
  reports = await budget('reports');
  proxy = await fleet.proxy(tenant, { SVC_ALLOWED_BUDGET_IDS: `${payroll},${reports}` });
  await proxy.start();
}, 60_000);

/** A call of a new execution charged to the budget (the sidecar's own when none is named). */
const ask = (budgetId?: string) =>
  chat(proxy, 'gpt-4o-mini', {
    headers: {
      'X-Svc-Execution-Id': randomUUID(),
      ...(budgetId === undefined ? {} : { 'X-Svc-Budget-Id': budgetId }),
    },
  });

describe("a call judged by its budget's workflow at the proxy", () => {
  it('meets a rule on workflow_id as envelope creation does, from the budget states NATS carries', async () => {
    const created = await fleet.cp.rest('POST', '/v1/policies', {
      tenant: 'teams',
      body: {
        name: 'no-payroll-models',
        rules: [
          { action: 'llm:*', effect: 'deny', conditions: [{ field: 'workflow_id', operator: 'eq', value: 'payroll' }] },
        ],
        priority: 500,
      },
    });
    expect(created.status).toBe(201);
    await eventually(
      () => ask(payroll),
      (answer) => answer.status === 403,
      10_000,
    );
    expect(await ask(payroll)).toEqual({ status: 403, code: 'SVC-POL-2001' });
    expect(await ask(reports)).toEqual({ status: 200, code: null });
    // The sidecar's own budget names no workflow: the condition does not match.
    expect(await ask()).toEqual({ status: 200, code: null });
  }, 30_000);

  it('still knows the workflows after a restart while NATS is down', async () => {
    await proxy.stop();
    await fleet.nats.stop();
    try {
      await proxy.start();
      expect(await ask(payroll)).toEqual({ status: 403, code: 'SVC-POL-2001' });
      expect(await ask(reports)).toEqual({ status: 200, code: null });
    } finally {
      await fleet.nats.restart();
    }
  }, 40_000);
});
