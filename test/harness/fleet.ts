import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { startSimulator, type Simulator } from '../simulator/server.ts';
import { startNatsServer, type NatsServer, type NatsServerOptions } from './nats-server.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  proxyCa,
  proxyProcess,
  removeDirs,
  seedFleetTenant,
  warnings,
  type ControlPlaneProcess,
  type FleetTenant,
  type ProxyCa,
  type ProxyProcess,
} from './processes.ts';

export interface FleetOptions {
  nats?: NatsServerOptions;
  controlPlaneEnv?: Record<string, string>;
  /** Tenants seeded over REST, each with an API key and a budget of these limits. */
  tenants: Record<string, Record<string, number>>;
}

export interface Fleet {
  readonly nats: NatsServer;
  readonly sim: Simulator;
  readonly cp: ControlPlaneProcess;
  readonly ca: ProxyCa;
  tenant(id: string): FleetTenant;
  /** A proxy process of the tenant (not started), stopped and removed with the fleet. */
  proxy(tenant: FleetTenant, env?: Record<string, string>): Promise<ProxyProcess>;
}

/**
 * Registers the hooks of a fleet suite: a real nats-server, the provider simulator, a control-plane
 * process with the tenants seeded, one proxy CA; and the teardown of all of it, proxies included.
 */
export function useFleet(options: FleetOptions): Fleet {
  const caDir = mkdtempSync(join(tmpdir(), 'fleet-ca-'));
  const tenants = new Map<string, FleetTenant>();
  const proxies: ProxyProcess[] = [];
  let parts: { nats: NatsServer; sim: Simulator; cp: ControlPlaneProcess; ca: ProxyCa } | undefined;
  const ready = () => {
    if (parts === undefined) throw new Error('the fleet starts in beforeAll');
    return parts;
  };

  beforeAll(async () => {
    const nats = await startNatsServer(options.nats);
    const sim = await startSimulator();
    const cp = await controlPlaneProcess(nats.url, options.controlPlaneEnv);
    parts = { nats, sim, cp, ca: await proxyCa(caDir) };
    await cp.start();
    for (const [id, limits] of Object.entries(options.tenants)) tenants.set(id, await seedFleetTenant(cp, id, limits));
  }, 60_000);
  // A fleet test that fails on a loaded CI machine is not run again by hand: what the processes
  // warned of is the only trace of why.
  beforeEach((context) => {
    context.onTestFailed(() => {
      const processes = parts === undefined ? proxies : [parts.cp, ...proxies];
      for (const service of processes)
        process.stderr.write(`--- ${service.name}: warnings and errors ---\n${warnings(service.output())}\n`);
    });
  });
  afterAll(async () => {
    await killAllProcesses();
    await parts?.sim.close();
    await parts?.nats.dispose();
    await removeDirs([caDir, parts?.cp.dataDir, ...proxies.map((p) => p.dataDir)]);
  });

  return {
    get nats() {
      return ready().nats;
    },
    get sim() {
      return ready().sim;
    },
    get cp() {
      return ready().cp;
    },
    get ca() {
      return ready().ca;
    },
    tenant(id) {
      const tenant = tenants.get(id);
      if (tenant === undefined) throw new Error(`tenant ${id} is not seeded in this fleet`);
      return tenant;
    },
    async proxy(tenant, env = {}) {
      const { nats, sim, ca } = ready();
      const proxy = await proxyProcess({ natsUrl: nats.url, tenant, ca, openAiUpstream: sim.url, env });
      proxies.push(proxy);
      return proxy;
    },
  };
}
