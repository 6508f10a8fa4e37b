import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ProxyAgent } from 'undici';
import { ensureSidecarIdentity } from '../../control-plane/bootstrap/sidecar-identity.ts';
import { loadConfig } from '../../core/config/load.ts';
import type { Config } from '../../core/config/schema.ts';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { priceTableFromConfig } from '../../core/metering/price-table-from-config.ts';
import { cost, type PriceTable, type TokenUsage } from '../../core/metering/prices.ts';
import { createProxy, type Proxy, type ProxyAddresses, type ProxyDeps } from '../../proxy/create-proxy.ts';
import { eventually, ROOT_KEY, startControlPlane, type RunningControlPlane } from '../harness/control-plane.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';

export const TENANT = 'acme';

/** The REST envelope fields the suites read. */
export interface EnvelopeView {
  envelope_id: string;
  execution_id: string;
  budget_id: string;
  state: string;
  termination_reason?: string | null;
  cost_summary: {
    tokens_input: number;
    tokens_output: number;
    cost_usd: number;
    llm_calls: number;
    tool_calls: number;
  };
}

export interface RestAnswer {
  status: number;
  body: Record<string, unknown>;
}

export interface ProxyRig {
  sim: Simulator;
  cp: RunningControlPlane;
  proxy: Proxy;
  addresses: ProxyAddresses;
  prices: PriceTable;
  budgetId: string;
  /** Budgets made before the proxy started (`budgetsUsd`), in order, and bound to it. */
  boundBudgets: string[];
  /** An undici ProxyAgent trusting the proxy CA: what HTTPS_PROXY means to an undici-based SDK. */
  agent: ProxyAgent;
  /** REST call to the control plane as the root administrator of the rig's tenant. */
  admin(method: string, path: string, body?: unknown): Promise<RestAnswer>;
  /** Creates a policy over REST and waits until the proxy has installed the new ruleset. */
  addPolicy(body: Record<string, unknown>): Promise<string>;
  envelope(envelopeId: string): Promise<EnvelopeView | undefined>;
  priced(model: string, usage: TokenUsage | undefined): number;
  /** The `llm.call` usage event the proxy published for the request with this x-request-id. */
  usageEvent(requestId: string): Promise<UsageEventMessage>;
  close(): Promise<void>;
}

/**
 * A real control plane (REST, sync publisher, lease responder, event processor) and a real
 * proxy sharing one in-process Messaging, with the provider simulator standing in for every
 * provider host through upstream overrides.
 */
/** An in-process proxy on free loopback ports, standalone mode (it makes its CA), quiet. */
export function proxyTestConfig(dataDir: string, overrides: Partial<Record<keyof Config, unknown>>): Config {
  return loadConfig(
    {},
    {
      mode: 'standalone',
      data_dir: dataDir,
      log_level: 'silent',
      proxy_host: '127.0.0.1',
      proxy_port: 0,
      proxy_admin_port: 0,
      ...overrides,
    },
  );
}

export interface ProxyRigOptions extends Partial<Pick<ProxyDeps, 'resolve' | 'logger' | 'gc'>> {
  /**
   * Cost budgets (USD) made over REST before the proxy starts and added to its
   * allowed_budget_ids, since a sidecar may charge only the budgets it is bound to.
   */
  budgetsUsd?: number[];
}

export async function startProxyRig(
  configOverrides: Partial<Record<keyof Config, unknown>> = {},
  options: ProxyRigOptions = {},
): Promise<ProxyRig> {
  const sim = await startSimulator();
  const cp = await startControlPlane();
  const { identity } = await ensureSidecarIdentity(cp.plane, { dataDir: cp.dataDir, tenantId: TENANT });
  const admin = async (method: string, path: string, body?: unknown): Promise<RestAnswer> => {
    const res = await cp.call(method, path, { key: ROOT_KEY, body, headers: { 'x-tenant-id': TENANT } });
    return { status: res.status, body: res.body as Record<string, unknown> };
  };
  const boundBudgets: string[] = [];
  for (const [i, maxCostUsd] of (options.budgetsUsd ?? []).entries()) {
    const res = await admin('POST', '/v1/budgets', {
      name: `b-${i}-${maxCostUsd}`,
      type: 'cost',
      limits: { max_cost_usd: maxCostUsd },
    });
    if (res.status !== 201) throw new Error(`budget: ${res.status} ${JSON.stringify(res.body)}`);
    boundBudgets.push(String(res.body.budget_id));
  }
  const listed = configOverrides.allowed_budget_ids;
  const listedBudgets = typeof listed === 'string' ? listed : '';
  const dataDir = mkdtempSync(join(tmpdir(), 'proxy-'));
  const simHost = `127.0.0.1:${sim.port}`;
  const config = proxyTestConfig(dataDir, {
    upstream_overrides: [
      'api.openai.com',
      'api.anthropic.com',
      'generativelanguage.googleapis.com',
      'compat.local',
      'myres.openai.azure.com',
    ]
      .map((h) => `${h}=http://${simHost}`)
      .join(','),
    proxy_compatible_hosts: 'compat.local:8000',
    ...configOverrides,
    allowed_budget_ids: [listedBudgets, ...boundBudgets].join(','),
  });
  // As proxy/main.ts builds it, so the unknown-model rule of the configuration applies.
  const prices = priceTableFromConfig(config);
  const proxy = await createProxy({
    config,
    logger: options.logger ?? pino({ level: 'silent' }),
    ...(options.resolve === undefined ? {} : { resolve: options.resolve }),
    ...(options.gc === undefined ? {} : { gc: options.gc }),
    messaging: cp.messaging,
    prices,
    bootstrap: { tenantId: TENANT, apiKey: identity.api_key, budgetId: identity.budget_id },
  });
  const addresses = await proxy.listen();
  const agent = new ProxyAgent({ uri: addresses.proxyUrl, requestTls: { ca: proxy.caCertPem } });
  return {
    sim,
    cp,
    proxy,
    addresses,
    prices,
    budgetId: identity.budget_id,
    boundBudgets,
    agent,
    admin,
    async addPolicy(body) {
      const before = proxy.rulesets.current?.version;
      const res = await admin('POST', '/v1/policies', body);
      if (res.status !== 201) throw new Error(`policy: ${res.status} ${JSON.stringify(res.body)}`);
      await eventually(
        () => proxy.rulesets.current?.version,
        (v) => v !== before,
      );
      return String(res.body.policy_id);
    },
    async envelope(envelopeId) {
      const res = await admin('GET', `/v1/envelopes/${envelopeId}`);
      return res.status === 200 ? (res.body as unknown as EnvelopeView) : undefined;
    },
    priced(model, usage) {
      if (usage === undefined) throw new Error('simulator sent no usage');
      return cost(prices, model, usage).costUsd;
    },
    async usageEvent(requestId) {
      const found = await eventually(
        () =>
          cp.published.find(
            (m) =>
              m.subject === `svc.${TENANT}.events.llm.call` &&
              (m.data as UsageEventMessage).payload.request_id === requestId,
          ),
        (m) => m !== undefined,
        // Published after the proxy's drain bound and its group commit, later on a loaded machine.
        10_000,
      );
      return found?.data as UsageEventMessage;
    },
    async close() {
      await agent.close();
      await proxy.close();
      await cp.close();
      await sim.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
