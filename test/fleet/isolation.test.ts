import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { controlPlaneProcess, killAllProcesses, metricValue, proxyCa, proxyProcess, removeDirs, seedFleetTenant, type ControlPlaneProcess, type FleetTenant, type ProxyCa, type ProxyProcess } from '../harness/processes.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';
import { chat } from './agent-calls.ts';

const CONFIG = new URL('../../config/nats/tenant-isolation.conf', import.meta.url).pathname;
let nats: NatsServer;
let sim: Simulator;
let cp: ControlPlaneProcess;
let ca: ProxyCa;
let acme: FleetTenant;
let globex: FleetTenant;
const proxies: ProxyProcess[] = [];
const caDir = mkdtempSync(join(tmpdir(), 'fleet-ca-'));

beforeAll(async () => {
  nats = await startNatsServer({ configFile: CONFIG });
  sim = await startSimulator();
  cp = await controlPlaneProcess(nats.url, { SVC_NATS_USER: 'control-plane', SVC_NATS_PASSWORD: 'control-plane-secret' });
  await cp.start();
  acme = await seedFleetTenant(cp, 'acme', { max_cost_usd: 10, max_tokens: 10_000_000 });
  globex = await seedFleetTenant(cp, 'globex', { max_cost_usd: 10, max_tokens: 10_000_000 });
  ca = await proxyCa(caDir);
}, 60_000);

afterAll(async () => {
  await killAllProcesses();
  await sim?.close();
  await nats?.dispose();
  await removeDirs([caDir, cp?.dataDir, ...proxies.map((p) => p.dataDir)]);
});

async function startProxy(tenant: FleetTenant, env: Record<string, string>): Promise<ProxyProcess> {
  const proxy = await proxyProcess({ natsUrl: nats.url, tenant, ca, openAiUpstream: sim.url, env });
  proxies.push(proxy);
  await proxy.start();
  return proxy;
}

const usage = (tenant: FleetTenant) => cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId });

describe('processes under the tenant-isolation nats-server configuration (docs/nats.md)', () => {
  it("a proxy with its tenant's credentials gets its ruleset, leases and event delivery", async () => {
    const proxy = await startProxy(acme, { SVC_NATS_USER: 'proxy-acme', SVC_NATS_PASSWORD: 'proxy-acme-secret' });
    const created = await cp.rest('POST', '/v1/policies', { tenant: 'acme', body: { name: 'no-mini', rules: [{ action: 'llm:gpt-4o-mini', effect: 'deny' }], priority: 500 } });
    expect(created.status).toBe(201);
    expect(await eventually(() => chat(proxy, 'gpt-4o-mini'), (o) => o.status === 403, 5000)).toEqual({ status: 403, code: 'SVC-POL-2001' });
    expect(await chat(proxy, 'gpt-4o')).toEqual({ status: 200, code: null });
    await eventually(usage.bind(null, acme), (r) => r.body.llm_calls === 1, 10_000);
    const metrics = await proxy.metrics();
    expect(metricValue(metrics, 'svc_proxy_lease_requests_total', 'outcome="granted"')).toBeGreaterThanOrEqual(1);
    expect(metricValue(metrics, 'svc_proxy_lease_requests_total', 'outcome="unreachable"') ?? 0).toBe(0);
  }, 40_000);

  it("a proxy holding acme's credentials but claiming tenant globex is refused by the server and stops at start", async () => {
    // It even uses the inbox acme's credentials allow, so replies could reach it if anything answered.
    const impostor = await proxyProcess({ natsUrl: nats.url, tenant: globex, ca, openAiUpstream: sim.url, env: { SVC_NATS_USER: 'proxy-acme', SVC_NATS_PASSWORD: 'proxy-acme-secret', SVC_NATS_INBOX_PREFIX: '_INBOX_acme' } });
    proxies.push(impostor);
    const sentBefore = sim.requests.length;
    await expect(impostor.start()).rejects.toThrow(/exited \(1\)/);
    // The server refused the watch of globex's ruleset key; a misbound sidecar says so and stops
    // instead of serving unenforced traffic.
    expect(impostor.output()).toMatch(/cannot watch svc_rulesets\/ruleset\.globex: 'Permissions Violation/);
    expect(sim.requests.length).toBe(sentBefore);
    expect((await usage(globex)).body.llm_calls).toBe(0);
    // acme's own proxy is untouched.
    expect(await chat(proxies[0]!, 'gpt-4o')).toEqual({ status: 200, code: null });
  }, 40_000);
});
