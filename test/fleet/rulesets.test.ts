import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { metricValue, type FleetTenant, type ProxyProcess } from '../harness/processes.ts';
import { chat } from './agent-calls.ts';

const fleet = useFleet({ tenants: { rules: { max_cost_usd: 100, max_tokens: 10_000_000 } } });
let proxy: ProxyProcess;
let tenant: FleetTenant;

beforeAll(async () => {
  tenant = fleet.tenant('rules');
  // Short lease timeouts, so that retries against an absent control plane open the circuit quickly.
  proxy = await fleet.proxy(tenant, { SVC_PROXY_LEASE_TIMEOUT_MS: '300' });
  await proxy.start();
}, 60_000);

const ask = (model: string) => chat(proxy, model);

describe('rulesets pushed to a proxy process over NATS', () => {
  it('enforces a policy created over REST within one second', async () => {
    expect(await ask('gpt-4o-mini')).toEqual({ status: 200, code: null });
    const created = await fleet.cp.rest('POST', '/v1/policies', {
      tenant: 'rules',
      body: { name: 'no-mini', rules: [{ action: 'llm:gpt-4o-mini', effect: 'deny' }], priority: 500 },
    });
    expect(created.status).toBe(201);
    const createdAt = Date.now();
    let answer = await ask('gpt-4o-mini');
    while (answer.status === 200 && Date.now() - createdAt < 5000) answer = await ask('gpt-4o-mini');
    const enforcedAfterMs = Date.now() - createdAt;
    expect(answer).toEqual({ status: 403, code: 'SVC-POL-2001' });
    expect(enforcedAfterMs).toBeLessThan(1000);
    expect(await ask('gpt-4o')).toEqual({ status: 200, code: null });
  }, 30_000);

  it('a proxy started while the control plane is down enforces the ruleset cached in its LMDB', async () => {
    await proxy.stop();
    await fleet.cp.stop();
    const sentBefore = fleet.sim.requests.length;
    // Ready (200) only because the cached ruleset is there: without one it would fail closed (503).
    await proxy.start();
    expect(await ask('gpt-4o-mini')).toEqual({ status: 403, code: 'SVC-POL-2001' });
    expect(fleet.sim.requests.length).toBe(sentBefore);
    // The budget runs on the soft limit meanwhile; allowed models are served.
    expect(await ask('gpt-4o')).toEqual({ status: 200, code: null });
    expect(fleet.sim.requests.length).toBe(sentBefore + 1);
    // Lease requests nobody answers open the control-plane circuit (spec 3.5): later renewals fail
    // fast without being sent, and calls are still served on the soft limit.
    const circuit = (text: string) => metricValue(text, 'svc_proxy_circuit_state', 'dependency="control_plane"');
    const open = await eventually(
      () => proxy.metrics(),
      (text) => circuit(text) === 2,
      10_000,
    );
    await eventually(
      () => proxy.metrics(),
      (text) => (metricValue(text, 'svc_proxy_circuit_fast_failures_total', 'dependency="control_plane"') ?? 0) > 0,
      5000,
    );
    expect(metricValue(open, 'svc_proxy_lease_requests_total', 'outcome="unreachable"')).toBeGreaterThanOrEqual(5);
    expect(await ask('gpt-4o')).toEqual({ status: 200, code: null });
  }, 40_000);
  it('a proxy started while NATS is down enforces the cached ruleset, and delivers its events once NATS is back', async () => {
    await proxy.stop();
    await fleet.cp.start();
    await fleet.nats.stop();
    await proxy.start();
    expect(await ask('gpt-4o-mini')).toEqual({ status: 403, code: 'SVC-POL-2001' });
    expect(await ask('gpt-4o')).toEqual({ status: 200, code: null });
    expect(metricValue(await proxy.metrics(), 'svc_proxy_outbox_depth')).toBeGreaterThan(0);

    await fleet.nats.restart();
    const served = fleet.sim.requests.filter((r) => r.path === '/v1/chat/completions' && r.status === 200).length;
    const usage = () => fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId });
    await eventually(usage, (r) => r.body.llm_calls === served, 20_000);
    await eventually(
      async () => metricValue(await proxy.metrics(), 'svc_proxy_outbox_depth'),
      (d) => d === 0,
      10_000,
    );
    // Connected now: a policy change reaches it again.
    const created = await fleet.cp.rest('POST', '/v1/policies', {
      tenant: 'rules',
      body: { name: 'no-4o', rules: [{ action: 'llm:gpt-4o', effect: 'deny' }], priority: 500 },
    });
    expect(created.status).toBe(201);
    expect(
      await eventually(
        () => ask('gpt-4o'),
        (a) => a.status === 403,
        5000,
      ),
    ).toEqual({ status: 403, code: 'SVC-POL-2001' });
  }, 50_000);
});
