/**
 * The whole proxy (`createProxy`: envelope, policy ruleset, budget lease, token counting, events
 * through the outbox) in a process of its own, on in-process messaging: a ruleset of `policies`
 * policies sits in the key-value store, and lease requests are answered with large slices, as
 * an idle control plane would. `api.openai.com` goes to `upstream`. Started with `fork` by the
 * benchmarks and the memory test; it sends `{ port, caPem }` once listening and answers the
 * message 'stats' with its memory ('stats after gc': after a full GC; it runs with --expose-gc).
 *
 *   fork('test/bench/governed-proxy.ts', [JSON.stringify({ upstream, dataDir, policies })])
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { priceTableFromConfig } from '../../core/metering/price-table-from-config.ts';
import type { Policy } from '../../core/policy/index.ts';
import { BUCKETS, keys, type LeaseRequest } from '../../core/sync/contract.ts';
import { createProxy } from '../../proxy/create-proxy.ts';
import { proxyTestConfig } from '../proxy/harness.ts';

export interface GovernedProxyOptions {
  upstream: string;
  dataDir: string;
  policies: number;
  /** proxy_envelope_cache_entries. */
  envelopes?: number;
}

export interface GovernedProxyStats {
  heapUsed: number;
  rss: number;
}

const TENANT = 'bench';

/** Policies that never match the benchmark's calls, so every call walks the ruleset and is allowed. */
function policies(count: number): Policy[] {
  const now = new Date().toISOString();
  return Array.from({ length: count }, (_, i) => ({
    policy_id: randomUUID(),
    tenant_id: TENANT,
    name: `p${i}`,
    description: '',
    priority: 1 + i,
    status: 'ACTIVE',
    enforcement: 'BLOCK',
    rules: [
      { rule_id: 'a', name: 'tool', action: `tool:tool_${i}`, decision: 'DENY', conditions: [] },
      {
        rule_id: 'b',
        name: 'model',
        action: 'llm:*',
        decision: 'DENY',
        conditions: [{ field: 'max_output_tokens', operator: 'gt', value: 1_000_000 + i }],
      },
    ],
    tags: {},
    version: 1,
    created_at: now,
    updated_at: now,
  }));
}

/** The governed proxy in this process, listening; `close` stops it. */
export async function governedProxy(
  options: GovernedProxyOptions,
): Promise<{ port: number; caPem: string; close: () => Promise<void> }> {
  const logger = pino({ level: 'silent' });
  // The stand-in for NATS keeps little: what it holds is not the proxy's memory.
  const memory = createMemoryMessaging({ logger, maxMessages: 100, duplicateWindowSize: 100 });
  const rulesets = await memory.keyValue.open(BUCKETS.rulesets);
  await rulesets.put(keys.ruleset(TENANT), {
    tenant_id: TENANT,
    version: 1,
    policies: policies(options.policies),
    published_at: new Date().toISOString(),
  });
  const messaging = {
    ...memory,
    requests: {
      request: (_subject: string, data: unknown) =>
        Promise.resolve({
          lease_id: randomUUID(),
          budget_id: (data as LeaseRequest).budget_id,
          tokens: null,
          micros: 1e12,
          expires_at: new Date(Date.now() + 3_600_000).toISOString(),
          status: 'active',
        }),
      reply: memory.requests.reply.bind(memory.requests),
    },
  };
  const config = proxyTestConfig(options.dataDir, {
    upstream_overrides: `api.openai.com=${options.upstream}`,
    log_level: 'silent',
    ...(options.envelopes !== undefined ? { proxy_envelope_cache_entries: options.envelopes } : {}),
  });
  const proxy = await createProxy({
    config,
    logger,
    messaging,
    prices: priceTableFromConfig(config),
    bootstrap: { tenantId: TENANT, apiKey: 'bench-key', budgetId: 'bench-budget' },
    gc: globalThis.gc,
  });
  const { proxyPort } = await proxy.listen();
  return { port: proxyPort, caPem: proxy.caCertPem, close: () => proxy.close() };
}

async function serve(options: GovernedProxyOptions): Promise<void> {
  const { port, caPem } = await governedProxy(options);
  process.send?.({ port, caPem });
  process.on('message', (message) => {
    if (message !== 'stats' && message !== 'stats after gc') return;
    if (message === 'stats after gc') globalThis.gc?.();
    const { heapUsed, rss } = process.memoryUsage();
    process.send?.({ heapUsed, rss } satisfies GovernedProxyStats);
  });
}

if (process.argv[1] === import.meta.filename) await serve(JSON.parse(process.argv[2] ?? '{}') as GovernedProxyOptions);
