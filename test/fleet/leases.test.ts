import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { LeaseGrantSchema, syncSubjects } from '../../core/sync/contract.ts';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { type FleetTenant, type ProxyProcess } from '../harness/processes.ts';

const LEASE_TTL_S = 5;
const fleet = useFleet({
  controlPlaneEnv: { SVC_LEASE_TTL_SECONDS: String(LEASE_TTL_S) },
  tenants: { leasing: { max_cost_usd: 1, max_tokens: 10_000_000 } },
});
let tenant: FleetTenant;
let probe: Messaging;

beforeAll(async () => {
  tenant = fleet.tenant('leasing');
  probe = await openNatsMessaging(
    { connection: { servers: fleet.nats.url }, manage: false },
    pino({ level: 'silent' }),
  );
}, 60_000);

afterAll(async () => {
  await probe?.close();
});

async function startProxy(): Promise<ProxyProcess> {
  const proxy = await fleet.proxy(tenant, { SVC_PROXY_LEASE_USD: '0.3' });
  await proxy.start();
  return proxy;
}

/**
 * What a new holder would be granted of the $1 budget right now (micro-dollars), asked over the
 * same request-reply a proxy uses; the probe's own lease is returned at once.
 */
async function unleasedMicros(): Promise<number> {
  const ask = (release: boolean, leaseId: string | null) =>
    probe.requests.request(
      syncSubjects.lease(tenant.tenantId),
      {
        tenant_id: tenant.tenantId,
        budget_id: tenant.budgetId,
        holder: 'probe',
        lease_id: leaseId,
        want_tokens: 0,
        want_micros: 1_000_000,
        release,
      },
      2000,
    );
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
