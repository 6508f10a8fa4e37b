import { afterEach, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../core/domain/index.ts';
import {
  seedTenant,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
  type TenantResources,
} from '../harness/control-plane.ts';

let cp: RunningControlPlane;
afterEach(async () => cp.close());

/** Everything the tenant (and the root, for the tenant registry) can read back. */
async function readAll(key: string, seed: TenantResources): Promise<Record<string, unknown>> {
  const paths = {
    tenants: ['/v1/tenants', null],
    envelope: [`/v1/envelopes/${seed.envelopeId}`, key],
    envelopes: ['/v1/envelopes', key],
    budget: [`/v1/budgets/${seed.budgetId}`, key],
    usage: [`/v1/budgets/${seed.budgetId}/usage`, key],
    budgets: ['/v1/budgets', key],
    policy: [`/v1/policies/${seed.policyId}`, key],
    policies: ['/v1/policies', key],
    keys: ['/v1/api-keys', key],
    audit: ['/v1/audit?limit=1000', key],
    verify: ['/v1/audit/verify', key],
  } as const;
  const out: Record<string, unknown> = {};
  for (const [name, [path, as]] of Object.entries(paths)) {
    const res = await cp.call('GET', path, as === null ? {} : { key: as });
    expect(res.status, path).toBe(200);
    out[name] = res.body;
  }
  return out;
}

describe('state survives a restart on the same data directory', () => {
  it('reads everything back unchanged, keeps keys working, and continues the audit chain', async () => {
    cp = await startControlPlane();
    const key = await tenantWithKey(cp, 'acme');
    const seed = await seedTenant(cp, key);
    const event = { event_type: 'tool.invoke', timestamp: new Date().toISOString(), cost_usd: 0.5 };
    expect((await cp.call('POST', `/v1/envelopes/${seed.envelopeId}/events`, { key, body: event })).status).toBe(202);
    const before = await readAll(key, seed);
    expect(before.usage).toMatchObject({
      cost_usd: 0.75,
      tokens_used: 150,
      executions: 1,
      tool_calls: 1,
      llm_calls: 1,
    });

    cp = await cp.restart();
    expect(await readAll(key, seed)).toEqual(before);

    const version = await cp.call('GET', '/version', { key: null });
    expect(version.status).toBe(200);
    expect((version.body as { schema_version: number }).schema_version).toBeGreaterThanOrEqual(1);

    // The ruleset is rebuilt from storage: the stored deny still applies.
    const denied = await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'tool:shell', context: {} } });
    expect(denied.body).toMatchObject({ allowed: false, matched_policy: seed.policyId });

    const previous = (before.audit as AuditRecord[])[0]!;
    const [next] = (await cp.call('GET', '/v1/audit?limit=1', { key })).body as AuditRecord[];
    expect(next).toMatchObject({ seq: previous.seq + 1, prev_hash: previous.hash, action: 'policy.evaluate' });
    expect((await cp.call('GET', '/v1/audit/verify', { key })).body).toMatchObject({
      valid: true,
      checked: previous.seq + 1,
    });

    // Usage keeps adding up from where it was.
    expect((await cp.call('POST', `/v1/envelopes/${seed.envelopeId}/events`, { key, body: event })).status).toBe(202);
    expect((await cp.call('GET', `/v1/budgets/${seed.budgetId}/usage`, { key })).body).toMatchObject({
      cost_usd: 1.25,
      tool_calls: 2,
    });
  });
});
