import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { LeaseGrantSchema, syncSubjects } from '../../core/sync/contract.ts';
import { eventually } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { controlPlaneProcess, killAllProcesses, proxyCa, proxyProcess, removeDirs, seedFleetTenant, type ControlPlaneProcess, type FleetTenant, type ProxyProcess } from '../harness/processes.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';

const LEASE_TTL_S = 5;
let nats: NatsServer;
let sim: Simulator;
let cp: ControlPlaneProcess;
let tenant: FleetTenant;
let probe: Messaging;
const proxies: ProxyProcess[] = [];
const caDir = mkdtempSync(join(tmpdir(), 'fleet-ca-'));

beforeAll(async () => {
  nats = await startNatsServer();
  sim = await startSimulator();
  cp = await controlPlaneProcess(nats.url, { SVC_LEASE_TTL_SECONDS: String(LEASE_TTL_S) });
  await cp.start();
  tenant = await seedFleetTenant(cp, 'leasing', { max_cost_usd: 1, max_tokens: 10_000_000 });
  probe = await openNatsMessaging({ connection: { servers: nats.url }, manage: false }, pino({ level: 'silent' }));
}, 60_000);

afterAll(async () => {
  await killAllProcesses();
  await probe?.close();
  await sim?.close();
  await nats?.dispose();
  await removeDirs([caDir, cp?.dataDir, ...proxies.map((p) => p.dataDir)]);
});

async function startProxy(): Promise<ProxyProcess> {
  const proxy = await proxyProcess({ natsUrl: nats.url, tenant, ca: await proxyCa(caDir), openAiUpstream: sim.url, env: { SVC_PROXY_LEASE_USD: '0.3' } });
  proxies.push(proxy);
  await proxy.start();
  return proxy;
}

/**
 * What a new holder would be granted of the $1 budget right now (micro-dollars), asked over the
 * same request-reply a proxy uses; the probe's own lease is returned at once.
 */
async function unleasedMicros(): Promise<number> {
  const ask = (release: boolean, leaseId: string | null) =>
    probe.requests.request(syncSubjects.lease(tenant.tenantId), { tenant_id: tenant.tenantId, budget_id: tenant.budgetId, holder: 'probe', lease_id: leaseId, want_tokens: 0, want_micros: 1_000_000, release }, 2000);
  const grant = LeaseGrantSchema.parse(await ask(false, null));
  await ask(true, grant.lease_id);
  return grant.micros ?? -1;
}

describe('budget leases held by proxy processes', () => {
  it('are granted from the unleased remainder and returned when a proxy shuts down', async () => {
    expect(await unleasedMicros()).toBe(1_000_000);
    const proxy = await startProxy();
    expect(await unleasedMicros()).toBe(700_000);
    await proxy.stop();
    expect(await unleasedMicros()).toBe(1_000_000);
  }, 40_000);

  it('expire when a proxy vanishes without returning its lease', async () => {
    const proxy = await startProxy();
    expect(await unleasedMicros()).toBe(700_000);
    await proxy.kill();
    // Nothing was returned: the slice stays held until its time to live runs out.
    expect(await unleasedMicros()).toBe(700_000);
    await eventually(unleasedMicros, (m) => m === 1_000_000, (LEASE_TTL_S + 3) * 1000);
  }, 40_000);
});
