import { mkdtempSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ProxyAgent } from 'undici';
import { ensureSidecarIdentity } from '../../control-plane/bootstrap/sidecar-identity.ts';
import { createControlPlane, type ControlPlane } from '../../control-plane/create-control-plane.ts';
import { createPricer } from '../../control-plane/usage/pricer.ts';
import type { Messaging } from '../../core/bus/bus.ts';
import { deferMessaging } from '../../core/bus/deferred-messaging.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { loadConfig } from '../../core/config/load.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createProxy, type Proxy } from '../../proxy/create-proxy.ts';
import { generateCa } from '../../proxy/tls/ca-generate.ts';
import { eventually, ROOT_KEY } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { startTcpRelay, type TcpRelay } from '../harness/tcp-relay.ts';
import { controlPlaneDatabase, type ControlPlaneDatabase } from '../harness/postgres.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';

/**
 * The proxy and the control plane as separate processes would run them, in this process: each
 * with its own connection to a real nats-server, the control plane on its own store (a
 * PostgreSQL database under SVC_TEST_STORAGE=postgres), the proxy forwarding OpenAI calls to the
 * provider simulator, for tenant `acme`.
 */
export interface NatsPair {
  readonly natsUrl: string;
  readonly sim: Simulator;
  /** The current proxy (another one after `restartProxy`). */
  readonly proxy: Proxy;
  /** The proxy's traffic address (reverse routes such as `/mcp/<name>/mcp`). */
  readonly proxyUrl: string;
  /** The proxy's way to NATS, which a test may cut and restore (a network outage). */
  readonly proxyLink: TcpRelay;
  /** The current control plane (another one after `restartPlane`). */
  readonly plane: ControlPlane;
  readonly cpUrl: string;
  /** Routes an SDK through the proxy (HTTPS_PROXY), trusting its CA. */
  readonly agent: ProxyAgent;
  /** A REST call as the bootstrap administrator acting for `acme`. */
  rest(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Resolves once the control plane has stored the envelope (proxies announce theirs over NATS). */
  envelopeStored(envelopeId: string): Promise<void>;
  /** Creates a policy over REST and waits until the proxy enforces it (its ruleset holds it). */
  addPolicy(policy: Record<string, unknown>): Promise<void>;
  /** Closes the control plane (its store stays); `startPlane` starts it again on the same store. */
  stopPlane(): Promise<void>;
  startPlane(): Promise<void>;
  /** Closes the proxy before `close` (a suite testing its shutdown). */
  closeProxy(): Promise<void>;
  /**
   * Closes the proxy and its NATS connection and starts a new one on the same data directory, as
   * a restarted sidecar; `proxy`, `proxyUrl` and `agent` then reach the new one.
   */
  restartProxy(): Promise<void>;
  close(): Promise<void>;
}

export async function startNatsPair(
  proxySettings: Record<string, unknown> = {},
  planeSettings: Record<string, unknown> = {},
): Promise<NatsPair> {
  const logger = pino({ level: 'silent' });
  const prices = loadPriceTable();
  const dirs = [mkdtempSync(join(tmpdir(), 'cp-nats-')), mkdtempSync(join(tmpdir(), 'proxy-nats-'))] as const;
  const nats: NatsServer = await startNatsServer();
  const sim = await startSimulator();
  const cpMessaging: Messaging = await openNatsMessaging({ manage: true, connection: { servers: nats.url } }, logger);
  const database: ControlPlaneDatabase | null = await controlPlaneDatabase();
  let plane: ControlPlane | null = null;
  let cpUrl = '';
  const startPlane = async (): Promise<void> => {
    plane = await createControlPlane({
      config: loadConfig(
        {},
        {
          ...database?.config,
          data_dir: dirs[0],
          http_host: '127.0.0.1',
          http_port: 0,
          grpc_port: 0,
          bootstrap_admin_key: ROOT_KEY,
          log_level: 'silent',
          ...planeSettings,
        },
      ),
      logger,
      messaging: cpMessaging,
      pricer: createPricer(prices),
    });
    cpUrl = await plane.listen();
  };
  const current = (): ControlPlane => {
    if (plane === null) throw new Error('the control plane is stopped');
    return plane;
  };
  await startPlane();
  const { identity } = await ensureSidecarIdentity(current(), { dataDir: dirs[0], tenantId: 'acme' });
  // The proxy reaches NATS through a relay, so a test can cut it off alone.
  const natsPort = Number(new URL(nats.url).port);
  const proxyLink = await startTcpRelay({ host: '127.0.0.1', port: natsPort });
  const config = loadConfig(
    {},
    {
      mode: 'proxy',
      data_dir: dirs[1],
      log_level: 'silent',
      proxy_host: '127.0.0.1',
      proxy_port: 0,
      proxy_admin_port: 0,
      ca_cert_file: join(dirs[1], 'ca.pem'),
      ca_key_file: join(dirs[1], 'ca-key.pem'),
      upstream_overrides: `api.openai.com=http://127.0.0.1:${sim.port}`,
      ...proxySettings,
    },
  );
  // Proxy mode never generates a CA: an operator mounts one. The test makes it the way an operator would.
  const ca = await generateCa();
  await writeFile(config.ca_cert_file ?? '', ca.certPem);
  await writeFile(config.ca_key_file ?? '', ca.keyPem);
  let proxyMessaging!: Messaging;
  let proxy!: Proxy;
  let proxyUrl = '';
  let agent!: ProxyAgent;
  let proxyOpen = false;
  const startProxy = async (): Promise<void> => {
    // As the sidecar's entry point does: it starts even while NATS is away.
    const messaging = deferMessaging({
      open: () =>
        openNatsMessaging({ manage: false, connection: { servers: `nats://127.0.0.1:${proxyLink.port}` } }, logger),
      logger,
      retryMs: 200,
      onFatal: () => undefined,
    });
    await Promise.race([messaging.ready.catch(() => undefined), new Promise((r) => setTimeout(r, 1000))]);
    proxyMessaging = messaging;
    proxy = await createProxy({
      config,
      logger,
      messaging: proxyMessaging,
      prices,
      bootstrap: { tenantId: 'acme', apiKey: identity.api_key, budgetId: identity.budget_id },
    });
    proxyUrl = (await proxy.listen()).proxyUrl;
    proxyOpen = true;
    agent = new ProxyAgent({ uri: proxyUrl, requestTls: { ca: proxy.caCertPem } });
  };
  await startProxy();
  const closeProxy = async (): Promise<void> => {
    if (!proxyOpen) return;
    proxyOpen = false;
    // The proxy first: it answers the calls it holds before its listener closes.
    await proxy.close();
    await proxyMessaging.close();
    await agent.close();
  };
  const stopPlane = async (): Promise<void> => {
    const stopping = plane;
    plane = null;
    await stopping?.close();
  };

  const rest: NatsPair['rest'] = async (method, path, body) => {
    const res = await fetch(cpUrl + path, {
      method,
      headers: { 'x-api-key': ROOT_KEY, 'x-tenant-id': 'acme', 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: await res.json() };
  };

  return {
    natsUrl: nats.url,
    sim,
    get proxy() {
      return proxy;
    },
    get proxyUrl() {
      return proxyUrl;
    },
    proxyLink,
    get plane() {
      return current();
    },
    get cpUrl() {
      return cpUrl;
    },
    get agent() {
      return agent;
    },
    rest,
    async envelopeStored(envelopeId) {
      await eventually(
        () => rest('GET', `/v1/envelopes/${envelopeId}`),
        (r) => r.status === 200,
        5000,
        50,
      );
    },
    async addPolicy(policy) {
      const res = await rest('POST', '/v1/policies', policy);
      if (res.status !== 201) throw new Error(`policy not created: ${JSON.stringify(res.body)}`);
      const id = String(res.body.policy_id);
      await eventually(
        () => proxy.rulesets.current?.policies.some((p) => p.policyId === id),
        (held) => held === true,
        5000,
      );
    },
    stopPlane,
    startPlane,
    closeProxy,
    async restartProxy() {
      await closeProxy();
      await startProxy();
    },
    async close() {
      await closeProxy();
      await proxyLink.close();
      await stopPlane();
      await cpMessaging.close();
      await sim.close();
      await nats.dispose();
      await database?.drop();
      await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    },
  };
}
