import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { APIError } from 'openai';
import { pino } from 'pino';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch, ProxyAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Messaging } from '../../core/bus/bus.ts';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import type { Policy } from '../../core/policy/index.ts';
import { BUCKETS, keys, type RulesetSnapshot } from '../../core/sync/contract.ts';
import { createProxy, type Proxy, type ProxyAddresses } from '../../proxy/create-proxy.ts';
import { eventually } from '../harness/control-plane.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';
import { proxyTestConfig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

const logger = pino({ level: 'silent' });
let sim: Simulator;
let dataDir: string;

beforeAll(async () => {
  sim = await startSimulator();
  dataDir = mkdtempSync(join(tmpdir(), 'proxy-resilience-'));
});
afterAll(async () => {
  await sim.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** A proxy with no control plane at all: nobody answers leases, the ruleset bucket starts empty. */
async function lonelyProxy(
  messaging: Messaging,
): Promise<{ proxy: Proxy; addresses: ProxyAddresses; agent: ProxyAgent }> {
  const config = proxyTestConfig(dataDir, {
    upstream_overrides: `api.openai.com=http://127.0.0.1:${sim.port}`,
    proxy_soft_limit_usd: 0.002,
    proxy_lease_first_wait_ms: 50,
  });
  const proxy = await createProxy({
    config,
    logger,
    messaging,
    prices: loadPriceTable(),
    bootstrap: { tenantId: 'solo', apiKey: 'k', budgetId: 'budget-solo' },
  });
  const addresses = await proxy.listen();
  return { proxy, addresses, agent: new ProxyAgent({ uri: addresses.proxyUrl, requestTls: { ca: proxy.caCertPem } }) };
}

function denyPolicy(action: string): Policy {
  const now = new Date().toISOString();
  return {
    policy_id: randomUUID(),
    tenant_id: 'solo',
    name: `deny ${action}`,
    description: '',
    priority: 100,
    status: 'ACTIVE',
    enforcement: 'BLOCK',
    rules: [{ rule_id: 'r1', name: 'deny', action, decision: 'DENY', conditions: [] }],
    tags: {},
    version: 1,
    created_at: now,
    updated_at: now,
  };
}

async function status(
  promise: Promise<unknown>,
): Promise<{ status: number | undefined; code: string | null | undefined }> {
  try {
    await promise;
    return { status: 200, code: null };
  } catch (error) {
    if (error instanceof APIError) return { status: error.status, code: error.code };
    throw error;
  }
}

describe('the proxy without its control plane', () => {
  it('fails closed without a ruleset, enforces a synced one, and runs the budget on the soft limit', async () => {
    const messaging = createMemoryMessaging({ logger });
    const { proxy, addresses, agent } = await lonelyProxy(messaging);
    try {
      const ready = await fetch(`http://127.0.0.1:${addresses.adminPort}/health/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { reasons: string[] }).reasons).toEqual(['no policy ruleset synced or cached']);
      const client = openAiClient(agent, { 'x-sim-input-tokens': '1000' });
      const ask = (model: string) =>
        status(client.chat.completions.create({ model, max_tokens: 1000, messages: [{ role: 'user', content: 'x' }] }));
      expect(await ask('gpt-4o-mini')).toEqual({ status: 403, code: 'SVC-POL-2001' });

      const snapshot: RulesetSnapshot = {
        tenant_id: 'solo',
        version: 7,
        policies: [denyPolicy('llm:gpt-4o')],
        published_at: new Date().toISOString(),
      };
      await (await messaging.keyValue.open(BUCKETS.rulesets)).put(keys.ruleset('solo'), snapshot);
      expect(proxy.rulesets.current?.version).toBe(7);
      expect((await fetch(`http://127.0.0.1:${addresses.adminPort}/health/ready`)).status).toBe(200);

      expect(await ask('gpt-4o')).toEqual({ status: 403, code: 'SVC-POL-2001' });
      // Each call costs $0.00075 (1000 in, 1000 out at gpt-4o-mini prices); the soft limit is $0.002.
      expect(await ask('gpt-4o-mini')).toEqual({ status: 200, code: null });
      expect(proxy.leases.peek('budget-solo')?.mode).toBe('soft');
      expect(await ask('gpt-4o-mini')).toEqual({ status: 200, code: null });
      expect(await ask('gpt-4o-mini')).toEqual({ status: 200, code: null });
      expect(await ask('gpt-4o-mini')).toEqual({ status: 422, code: 'SVC-BUD-3001' });

      const metrics = await (await fetch(`http://127.0.0.1:${addresses.adminPort}/metrics`)).text();
      expect(metrics).toMatch(/svc_proxy_requests_total\{provider="openai",model="gpt-4o-mini",decision="allowed"\} 3/);
      expect(metrics).toMatch(/svc_proxy_lease_requests_total\{outcome="unreachable"\} [1-9]/);
      expect(metrics).toMatch(
        /svc_proxy_tokens_total\{provider="openai",model="gpt-4o-mini",direction="output"\} 3000/,
      );
    } finally {
      await agent.close();
      await proxy.close();
      await messaging.close();
    }
  });

  it('after a restart with nothing to sync from, enforces the cached ruleset at once', async () => {
    const messaging = createMemoryMessaging({ logger });
    const { proxy, addresses, agent } = await lonelyProxy(messaging);
    try {
      expect(proxy.rulesets.origin).toBe('cache');
      expect(proxy.rulesets.current?.version).toBe(7);
      expect((await fetch(`http://127.0.0.1:${addresses.adminPort}/health/ready`)).status).toBe(200);
      const denied = await status(
        openAiClient(agent).chat.completions.create({
          model: 'gpt-4o',
          max_tokens: 5,
          messages: [{ role: 'user', content: 'x' }],
        }),
      );
      expect(denied).toEqual({ status: 403, code: 'SVC-POL-2001' });
    } finally {
      await agent.close();
      await proxy.close();
      await messaging.close();
    }
  });

  it('returns the budget hold of a stream whose client went away once the rest is drained, charging the provider count', async () => {
    const messaging = createMemoryMessaging({ logger });
    const { proxy, agent } = await lonelyProxy(messaging);
    try {
      await openAiClient(agent).chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 1,
        messages: [{ role: 'user', content: 'warm up' }],
      });
      const lease = proxy.leases.peek('budget-solo');
      const before = lease?.available().pico ?? 0;
      const abort = new AbortController();
      const res = await fetch('https://api.openai.com/v1/chat/completions', {
        method: 'POST',
        dispatcher: agent,
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer sk',
          'x-sim-chunk-delay-ms': '20',
          'x-sim-output-tokens': '40',
        },
        body: JSON.stringify({
          model: 'gpt-4o-mini',
          max_tokens: 2000,
          stream: true,
          messages: [{ role: 'user', content: 'long' }],
        }),
      });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      // While the stream runs, the lease holds its estimate (2000 answer tokens, about $0.0012).
      expect(before - (lease?.available().pico ?? 0)).toBeGreaterThan(1_000_000_000);
      abort.abort();
      // The proxy reads the rest of the answer for the provider's final count: the hold is
      // returned and exactly the whole answer's price stays spent.
      const answered = await eventually(
        () => sim.requests.at(-1)?.usageSent,
        (usage) => usage !== undefined,
      );
      const price = cost(loadPriceTable(), 'gpt-4o-mini', answered ?? { input: 0, output: 0, cachedInput: 0 });
      expect(answered?.output).toBe(40);
      await eventually(
        () => before - (lease?.available().pico ?? 0),
        (spent) => spent === price.costPicoUsd,
      );
    } finally {
      await agent.close();
      await proxy.close();
      await messaging.close();
    }
  });
});
