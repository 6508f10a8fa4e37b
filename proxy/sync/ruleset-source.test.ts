import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { BusLogger } from '../../core/bus/bus.ts';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { BUCKETS, keys } from '../../core/sync/contract.ts';
import { createRulesetMetrics } from '../metrics/index.ts';
import { openProxyStore, type ProxyStore } from '../store/open-store.ts';
import { RulesetSource } from './ruleset-source.ts';

const silent: BusLogger = { warn: () => undefined, error: () => undefined };
const opened: { close(): unknown }[] = [];
afterEach(async () => {
  for (const thing of opened.splice(0)) await thing.close();
});

const snapshot = (version: number) => ({
  tenant_id: 'acme',
  version,
  policies: [],
  published_at: new Date().toISOString(),
});

async function metric(registry: Registry, name: string): Promise<{ labels: object; value: number }[]> {
  return (await registry.getSingleMetric(name)!.get()).values.map((v) => ({ labels: v.labels, value: v.value }));
}

describe('RulesetSource', () => {
  it('keeps the last good ruleset when a snapshot does not parse, and shows it: metrics and a warning with the version', async () => {
    const messaging = createMemoryMessaging({ logger: silent });
    const store: ProxyStore = openProxyStore(mkdtempSync(join(tmpdir(), 'ruleset-')), 0);
    opened.push(messaging, store);
    const registry = new Registry();
    const warnings: Record<string, unknown>[] = [];
    const source = new RulesetSource({
      tenantId: 'acme',
      keyValue: messaging.keyValue,
      store: store.root,
      logger: { info: () => undefined, warn: (fields) => warnings.push(fields) },
      metrics: createRulesetMetrics(registry),
    });
    const bucket = await messaging.keyValue.open(BUCKETS.rulesets);
    await bucket.put(keys.ruleset('acme'), snapshot(3));
    await source.start();
    opened.push({ close: () => source.stop() });
    expect(source.current?.version).toBe(3);
    expect(await metric(registry, 'svc_proxy_ruleset_version')).toEqual([{ labels: {}, value: 3 }]);

    await bucket.put(keys.ruleset('acme'), { ...snapshot(4), policies: [{ name: 'secret-pattern' }] });
    for (let i = 0; i < 100 && warnings.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(source.current?.version).toBe(3);
    expect(await metric(registry, 'svc_proxy_ruleset_version')).toEqual([{ labels: {}, value: 3 }]);
    expect(await metric(registry, 'svc_proxy_ruleset_rejected_total')).toEqual([
      { labels: { reason: 'parse' }, value: 1 },
    ]);
    expect(warnings).toEqual([expect.objectContaining({ version: 4, reason: 'parse', kept_version: 3 })]);
    expect(JSON.stringify(warnings)).not.toContain('secret-pattern');
  });
});
