import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  expectSvcError,
  seedTenant,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
  type TenantResources,
} from '../harness/control-plane.ts';

let cp: RunningControlPlane;
let tenantA: string;
let tenantB: string;
let keyA: string;
let keyB: string;
let b: TenantResources;
let before: unknown;

/** Everything tenant B can see of itself; compared before and after A's attempts. */
async function stateOfB(): Promise<unknown> {
  const read = async (path: string) => {
    const res = await cp.call('GET', path, { key: keyB });
    expect(res.status, path).toBe(200);
    return res.body as unknown;
  };
  return {
    envelope: await read(`/v1/envelopes/${b.envelopeId}`),
    envelopes: await read('/v1/envelopes'),
    budget: await read(`/v1/budgets/${b.budgetId}`),
    budgets: await read('/v1/budgets'),
    policies: await read('/v1/policies'),
    keys: await read('/v1/api-keys'),
    audit: await read('/v1/audit?limit=1000'),
    verify: await read('/v1/audit/verify'),
  };
}

const ids = (list: Array<Record<string, string>>, field: string) => list.map((r) => r[field]);
const asA = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  cp.call(method, path, { key: keyA, body, ...(headers ? { headers } : {}) });

beforeEach(async () => {
  cp = await startControlPlane();
  // UUID tenant ids: the REST contract types tenant_id as a uuid (policies validate it so).
  tenantA = randomUUID();
  tenantB = randomUUID();
  keyA = await tenantWithKey(cp, tenantA);
  keyB = await tenantWithKey(cp, tenantB);
  await seedTenant(cp, keyA);
  b = await seedTenant(cp, keyB);
  before = await stateOfB();
});
afterEach(async () => {
  expect(await stateOfB()).toEqual(before);
  await cp.close();
});

describe("a tenant's key cannot reach another tenant's resources", () => {
  it('envelopes: get, events, terminate, status and list', async () => {
    const e = `/v1/envelopes/${b.envelopeId}`;
    expectSvcError(await asA('GET', e), 404, 'SVC-ENV-1001');
    expectSvcError(
      await asA('POST', `${e}/events`, {
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        tokens: { input: 5, output: 5 },
        cost_usd: 1,
      }),
      404,
      'SVC-ENV-1001',
    );
    expectSvcError(await asA('POST', `${e}/terminate`, { reason: 'hostile' }), 404, 'SVC-ENV-1001');
    expectSvcError(await asA('POST', `${e}/status`, { status: 'PAUSED' }), 404, 'SVC-ENV-1001');
    // Naming B's budget without naming B: the budget is simply not one of A's.
    const charged = await asA('POST', '/v1/envelopes', { budget_id: b.budgetId, adapter_type: 'custom' });
    expect(expectSvcError(charged, 422, 'SVC-BUD-3005').details).toMatchObject({ budget_id: b.budgetId });
    const listed = await asA('GET', '/v1/envelopes');
    expect(listed.status).toBe(200);
    expect(listed.body).toHaveLength(1);
    expect(ids(listed.body, 'envelope_id')).not.toContain(b.envelopeId);
    expect(ids(listed.body, 'tenant_id')).toEqual([tenantA]);
  });

  it("events: A's event query never returns B's events", async () => {
    const mine = await asA('GET', '/v1/events');
    expect(mine.status).toBe(200);
    expect(mine.body.length).toBeGreaterThan(0);
    expect(new Set(mine.body.map((e: { tenant_id: string }) => e.tenant_id))).toEqual(new Set([tenantA]));
    expect((await asA('GET', `/v1/events?envelope_id=${b.envelopeId}`)).body).toEqual([]);
    expect((await cp.call('GET', `/v1/events?envelope_id=${b.envelopeId}`, { key: keyB })).body).toHaveLength(1);
    expectSvcError(await asA('GET', `/v1/events?tenantId=${tenantB}`), 403, 'SVC-SYS-9004');
  });

  it('budgets: get, usage, check and list', async () => {
    expectSvcError(await asA('GET', `/v1/budgets/${b.budgetId}`), 404, 'SVC-BUD-3002');
    expectSvcError(await asA('GET', `/v1/budgets/${b.budgetId}/usage`), 404, 'SVC-BUD-3002');
    expectSvcError(await asA('POST', `/v1/budgets/${b.budgetId}/check`, { estimated_tokens: 10 }), 404, 'SVC-BUD-3002');
    const listed = await asA('GET', '/v1/budgets');
    expect(listed.body).toHaveLength(1);
    expect(ids(listed.body, 'tenant_id')).toEqual([tenantA]);
  });

  it("policies: get and list, and evaluation never applies B's policies", async () => {
    expectSvcError(await asA('GET', `/v1/policies/${b.policyId}`), 404, 'SVC-POL-2002');
    const listed = await asA('GET', '/v1/policies');
    expect(ids(listed.body, 'policy_id')).not.toContain(b.policyId);
    expect(ids(listed.body, 'tenant_id')).toEqual([tenantA]);
    // Only B denies llm:*, so A's evaluation would be denied if it could see B's policies.
    const deny = await cp.call('POST', '/v1/policies', {
      key: keyB,
      body: { name: 'b-only', rules: [{ action: 'llm:*', effect: 'deny' }] },
    });
    expect(deny.status).toBe(201);
    before = await stateOfB();
    const probe = await asA('POST', '/v1/policies/evaluate', { action: 'llm:gpt-4o', context: {} });
    expect(probe.body).toMatchObject({ allowed: true, effect: 'no_match', matched_policy: null });
    // Named by its id, B's policy is no policy of A's: refused as unknown, as any other name.
    const named = await asA('POST', '/v1/policies/evaluate', {
      action: 'llm:gpt-4o',
      policy_set: [deny.body.policy_id],
      context: {},
    });
    expectSvcError(named, 404, 'SVC-POL-2002');
    // The same question asked by B is denied: the probe would have caught a leak.
    expect(
      (await cp.call('POST', '/v1/policies/evaluate', { key: keyB, body: { action: 'llm:gpt-4o', context: {} } })).body
        .allowed,
    ).toBe(false);
    before = await stateOfB();
  });

  it("API keys: list, and revoking B's key id", async () => {
    const listed = await asA('GET', '/v1/api-keys');
    expect(ids(listed.body, 'id')).not.toContain(b.keyId);
    expectSvcError(await asA('DELETE', `/v1/api-keys/${b.keyId}`), 404, 'SVC-SYS-9006');
    expect((await cp.call('GET', '/v1/envelopes', { key: keyB })).status).toBe(200);
  });

  it("audit: query and verify cover A's chain only", async () => {
    const records = (await asA('GET', '/v1/audit?limit=1000')).body as Array<{
      tenant_id: string;
      resource: { id: string };
    }>;
    expect(records.length).toBeGreaterThan(0);
    expect(new Set(records.map((r) => r.tenant_id))).toEqual(new Set([tenantA]));
    const bIds = [b.envelopeId, b.budgetId, b.policyId, b.keyId];
    expect(records.filter((r) => bIds.includes(r.resource.id))).toEqual([]);
    const verify = await asA('GET', '/v1/audit/verify');
    expect(verify.body).toMatchObject({ valid: true, checked: records.length });
  });
});

describe('naming another tenant is refused unless the caller is a platform administrator', () => {
  it('refuses tenant_id of B in bodies, queries and X-Tenant-ID with SVC-SYS-9004', async () => {
    const attempts: Array<[string, string, unknown?, Record<string, string>?]> = [
      ['POST', '/v1/envelopes', { tenant_id: tenantB, budget_id: b.budgetId, adapter_type: 'custom' }],
      ['POST', '/v1/budgets', { tenant_id: tenantB, name: 'planted', type: 'cost', limits: { max_cost_usd: 1 } }],
      [
        'POST',
        '/v1/policies',
        { tenant_id: tenantB, name: 'planted', rules: [{ action: '*', effect: 'allow' }], priority: 1000 },
      ],
      ['POST', '/v1/policies/evaluate', { tenant_id: tenantB, action: 'tool:shell', context: {} }],
      ['POST', `/v1/budgets?tenant_id=${tenantB}`, { name: 'planted', type: 'cost', limits: { max_cost_usd: 1 } }],
      ['GET', `/v1/budgets?tenant_id=${tenantB}`],
      ['GET', `/v1/policies?tenantId=${tenantB}`],
      ['GET', `/v1/envelopes?tenant_id=${tenantB}`],
      ['GET', `/v1/envelopes/${b.envelopeId}`, undefined, { 'x-tenant-id': tenantB }],
      ['POST', `/v1/envelopes/${b.envelopeId}/terminate`, {}, { 'x-tenant-id': tenantB }],
      ['DELETE', `/v1/api-keys/${b.keyId}`, undefined, { 'x-tenant-id': tenantB }],
      ['POST', '/v1/api-keys', { name: 'planted', scopes: ['admin'] }, { 'x-tenant-id': tenantB }],
      ['GET', '/v1/audit', undefined, { 'x-tenant-id': tenantB }],
    ];
    for (const [method, path, body, headers] of attempts) {
      const error = expectSvcError(await asA(method, path, body, headers), 403, 'SVC-SYS-9004');
      expect(error.details, `${method} ${path}`).toMatchObject({ tenant_id: tenantB });
    }
  });

  it('lets the root administrator act for B by X-Tenant-ID and by body tenant_id', async () => {
    const asB = { 'x-tenant-id': tenantB };
    const read = await cp.call('GET', `/v1/envelopes/${b.envelopeId}`, { headers: asB });
    expect(read.status).toBe(200);
    expect(read.body).toEqual((before as { envelope: unknown }).envelope);

    const byBody = await cp.call('POST', '/v1/budgets', {
      body: { tenant_id: tenantB, name: 'granted', type: 'cost', limits: { max_cost_usd: 2 } },
    });
    expect(byBody.status).toBe(201);
    expect(byBody.body.tenant_id).toBe(tenantB);
    const byHeader = await cp.call('POST', '/v1/policies', {
      headers: asB,
      body: { name: 'granted', rules: [{ action: 'tool:rm', effect: 'deny' }] },
    });
    expect(byHeader.status).toBe(201);
    expect(byHeader.body.tenant_id).toBe(tenantB);

    const budgets = await cp.call('GET', '/v1/budgets', { key: keyB });
    expect(ids(budgets.body, 'budget_id')).toContain(byBody.body.budget_id);
    const policies = await cp.call('GET', '/v1/policies', { key: keyB });
    expect(ids(policies.body, 'policy_id')).toContain(byHeader.body.policy_id);
    expect((await cp.call('GET', '/v1/budgets', { key: keyA })).body).toHaveLength(1);

    const conflicting = await cp.call('POST', '/v1/budgets', {
      headers: asB,
      body: { tenant_id: tenantA, name: 'x', type: 'cost', limits: { max_cost_usd: 1 } },
    });
    expectSvcError(conflicting, 400, 'SVC-SYS-9002');
    expectSvcError(
      await cp.call('GET', '/v1/budgets', { headers: { 'x-tenant-id': 'no-such-tenant' } }),
      404,
      'SVC-SYS-9006',
    );
    before = await stateOfB();
  });
});
