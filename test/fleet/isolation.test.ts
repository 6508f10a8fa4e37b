import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { metricValue, type FleetTenant, type ProxyProcess } from '../harness/processes.ts';
import { chat } from './agent-calls.ts';

const CONFIG = new URL('../../config/nats/tenant-isolation.conf', import.meta.url).pathname;
const fleet = useFleet({
  nats: { configFile: CONFIG },
  controlPlaneEnv: { SVC_NATS_USER: 'control-plane', SVC_NATS_PASSWORD: 'control-plane-secret' },
  tenants: { acme: { max_cost_usd: 10, max_tokens: 10_000_000 }, globex: { max_cost_usd: 10, max_tokens: 10_000_000 } },
});
let acme: FleetTenant;
let globex: FleetTenant;
let acmeProxy: ProxyProcess;

beforeAll(() => {
  acme = fleet.tenant('acme');
  globex = fleet.tenant('globex');
});

async function startProxy(tenant: FleetTenant, env: Record<string, string>): Promise<ProxyProcess> {
  const proxy = await fleet.proxy(tenant, env);
  await proxy.start();
  return proxy;
}

const usage = (tenant: FleetTenant) =>
  fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId });

describe('processes under the tenant-isolation nats-server configuration (docs/nats.md)', () => {
  it("a proxy with its tenant's credentials gets its ruleset, leases and event delivery", async () => {
    const proxy = (acmeProxy = await startProxy(acme, {
      SVC_NATS_USER: 'proxy-acme',
      SVC_NATS_PASSWORD: 'proxy-acme-secret',
    }));
    const created = await fleet.cp.rest('POST', '/v1/policies', {
      tenant: 'acme',
      body: { name: 'no-mini', rules: [{ action: 'llm:gpt-4o-mini', effect: 'deny' }], priority: 500 },
    });
    expect(created.status).toBe(201);
    expect(
      await eventually(
        () => chat(proxy, 'gpt-4o-mini'),
        (o) => o.status === 403,
        5000,
      ),
    ).toEqual({ status: 403, code: 'SVC-POL-2001' });
    expect(await chat(proxy, 'gpt-4o')).toEqual({ status: 200, code: null });
    await eventually(usage.bind(null, acme), (r) => r.body.llm_calls === 1, 10_000);
    const metrics = await proxy.metrics();
    expect(metricValue(metrics, 'svc_proxy_lease_requests_total', 'outcome="granted"')).toBeGreaterThanOrEqual(1);
    expect(metricValue(metrics, 'svc_proxy_lease_requests_total', 'outcome="unreachable"') ?? 0).toBe(0);
  }, 40_000);

  it("a proxy holding acme's credentials but claiming tenant globex is refused by the server and stops at start", async () => {
    // It even uses the inbox acme's credentials allow, so replies could reach it if anything answered.
    const impostor = await fleet.proxy(globex, {
      SVC_NATS_USER: 'proxy-acme',
      SVC_NATS_PASSWORD: 'proxy-acme-secret',
      SVC_NATS_INBOX_PREFIX: '_INBOX_acme',
    });
    const sentBefore = fleet.sim.requests.length;
    await expect(impostor.start()).rejects.toThrow(/exited \(1\)/);
    // The server refused the watch of globex's ruleset key; a misbound sidecar says so and stops
    // instead of serving unenforced traffic.
    expect(impostor.output()).toMatch(/cannot watch svc_rulesets\/ruleset\.globex: 'Permissions Violation/);
    expect(fleet.sim.requests.length).toBe(sentBefore);
    expect((await usage(globex)).body.llm_calls).toBe(0);
    // acme's own proxy is untouched.
    expect(await chat(acmeProxy, 'gpt-4o')).toEqual({ status: 200, code: null });
  }, 40_000);
});
