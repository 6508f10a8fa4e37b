import { mkdtempSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIError } from 'openai';
import { pino } from 'pino';
import { ProxyAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSidecarIdentity } from '../../control-plane/bootstrap/sidecar-identity.ts';
import { createControlPlane, type ControlPlane } from '../../control-plane/create-control-plane.ts';
import { createPricer } from '../../control-plane/usage/pricer.ts';
import type { Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { loadConfig } from '../../core/config/load.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createProxy, type Proxy } from '../../proxy/create-proxy.ts';
import { generateCa } from '../../proxy/tls/index.ts';
import { eventually, ROOT_KEY } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { controlPlaneDatabase, type ControlPlaneDatabase } from '../harness/postgres.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';
import { openAiClient } from './sdk-options.ts';

const logger = pino({ level: 'silent' });
let nats: NatsServer;
let sim: Simulator;
let cpMessaging: Messaging;
let proxyMessaging: Messaging;
let plane: ControlPlane;
let proxy: Proxy;
let agent: ProxyAgent;
let cpUrl = '';
let database: ControlPlaneDatabase | null;
const dirs = [mkdtempSync(join(tmpdir(), 'cp-nats-')), mkdtempSync(join(tmpdir(), 'proxy-nats-'))] as const;

beforeAll(async () => {
  nats = await startNatsServer();
  sim = await startSimulator();
  cpMessaging = await openNatsMessaging({ manage: true, connection: { servers: nats.url } }, logger);
  const prices = loadPriceTable();
  database = await controlPlaneDatabase();
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
      },
    ),
    logger,
    messaging: cpMessaging,
    pricer: createPricer(prices),
  });
  cpUrl = await plane.listen();
  const { identity } = await ensureSidecarIdentity(plane, { dataDir: dirs[0], tenantId: 'acme' });
  proxyMessaging = await openNatsMessaging({ manage: false, connection: { servers: nats.url } }, logger);
  const config = loadConfig(
    {},
    {
      mode: 'proxy',
      data_dir: dirs[1],
      log_level: 'silent',
      proxy_host: '127.0.0.1',
      proxy_port: 0,
      proxy_admin_port: 0,
      ca_cert_file: join(dirs[1], 'missing-ca.pem'),
      ca_key_file: join(dirs[1], 'missing-ca-key.pem'),
      upstream_overrides: `api.openai.com=http://127.0.0.1:${sim.port}`,
    },
  );
  // Proxy mode never generates a CA: an operator mounts one. The test makes it the way an operator would.
  const ca = await generateCa();
  await writeFile(config.ca_cert_file ?? '', ca.certPem);
  await writeFile(config.ca_key_file ?? '', ca.keyPem);
  proxy = await createProxy({
    config,
    logger,
    messaging: proxyMessaging,
    prices,
    bootstrap: { tenantId: 'acme', apiKey: identity.api_key, budgetId: identity.budget_id },
  });
  const addresses = await proxy.listen();
  agent = new ProxyAgent({ uri: addresses.proxyUrl, requestTls: { ca: proxy.caCertPem } });
});
afterAll(async () => {
  await agent.close();
  await proxy.close();
  await proxyMessaging.close();
  await plane.close();
  await cpMessaging.close();
  await sim.close();
  await nats.dispose();
  await database?.drop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function rest(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(cpUrl + path, {
    method,
    headers: { 'x-api-key': ROOT_KEY, 'x-tenant-id': 'acme', 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('proxy and control plane as separate processes over NATS', () => {
  it('syncs the ruleset, leases the budget and delivers usage to the envelope', async () => {
    await eventually(
      () => proxy.rulesets.origin,
      (origin) => origin === 'sync',
      5000,
    );
    const { data, response } = await openAiClient(agent, { 'X-Svc-Execution-Id': 'exec-nats' })
      .chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'over nats' }],
      })
      .withResponse();
    expect(data.usage?.completion_tokens).toBe(5);
    expect(
      proxy.leases.peek(proxy.envelopes.get(String(response.headers.get('x-svc-envelope-id')))?.budgetId ?? '')?.mode,
    ).toBe('granted');
    const envelope = await eventually(
      () => rest('GET', `/v1/envelopes/${response.headers.get('x-svc-envelope-id')}`),
      (r) => (r.body.cost_summary as { llm_calls?: number } | undefined)?.llm_calls === 1,
      5000,
    );
    expect(envelope.body.execution_id).toBe('exec-nats');

    const policy = await rest('POST', '/v1/policies', {
      name: 'no-mini',
      rules: [{ action: 'llm:gpt-4o-mini', effect: 'deny' }],
      priority: 600,
    });
    expect(policy.status).toBe(201);
    await eventually(
      () => proxy.rulesets.current?.policies.length,
      (n) => n === 1,
      5000,
    );
    let error: unknown;
    try {
      await openAiClient(agent).chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'denied' }],
      });
    } catch (caught) {
      error = caught;
    }
    expect((error as APIError).code).toBe('SVC-POL-2001');
  });
});
