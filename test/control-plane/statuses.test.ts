import { status } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import {
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { clientsFor, failure, statusDetails, unary } from '../harness/grpc.ts';
import { clockEarlyInAMinute } from '../harness/minute-clock.ts';

const COSTS = 'svc.cost.v1.CostService';

let cp: RunningControlPlane;
afterEach(async () => cp.close());

const event = (cost: number) => ({
  event_type: 'llm.call',
  timestamp: new Date().toISOString(),
  tokens: { input: 10, output: 5 },
  cost_usd: cost,
});
const expectTerminal = (res: { headers: Headers }) => expect(res.headers.get('x-should-retry')).toBe('false');

async function withTenant(overrides: Record<string, unknown> = {}, clock?: () => Date): Promise<string> {
  cp = await startControlPlane(overrides, undefined, undefined, clock);
  return tenantWithKey(cp, 'acme');
}

describe('REST statuses of spec 7.2', () => {
  it('201 created, 202 accepted, 200 terminated, 409 already terminated, 404 unknown envelope', async () => {
    const key = await withTenant();
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'b', type: 'cost', limits: { max_cost_usd: 5 } },
    });
    expect(budget.status).toBe(201);
    const created = await cp.call('POST', '/v1/envelopes', {
      key,
      body: { budget_id: budget.body.budget_id, adapter_type: 'custom' },
    });
    expect(created.status).toBe(201);
    expect(created.body.state).toBe('AUTHORIZED');
    const id = created.body.envelope_id as string;
    const accepted = await cp.call('POST', `/v1/envelopes/${id}/events`, { key, body: event(0.1) });
    expect(accepted.status).toBe(202);
    expect(accepted.body).toMatchObject({ accepted: true, envelope_id: id });
    expect((await cp.call('POST', `/v1/envelopes/${id}/terminate`, { key })).status).toBe(200);

    const again = await cp.call('POST', `/v1/envelopes/${id}/terminate`, { key });
    expectSvcError(again, 409, 'SVC-ENV-1003');
    expectTerminal(again);
    const late = await cp.call('POST', `/v1/envelopes/${id}/events`, { key, body: event(0.1) });
    expectSvcError(late, 409, 'SVC-ENV-1003');

    const missing = await cp.call('GET', '/v1/envelopes/5b0c6f8e-7d1a-4c7e-9a51-0c7f0d2b9e11', { key });
    expect(expectSvcError(missing, 404, 'SVC-ENV-1001').details).toMatchObject({
      envelope_id: '5b0c6f8e-7d1a-4c7e-9a51-0c7f0d2b9e11',
    });
    expectTerminal(missing);
  });

  it('403 with a PolicyViolation body when a policy denies the execution', async () => {
    const key = await withTenant();
    const policy = await cp.call('POST', '/v1/policies', {
      key,
      body: {
        name: 'no-custom',
        rules: [{ action: 'execution:start', effect: 'deny', message: 'custom adapters are not allowed' }],
      },
    });
    const res = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    expectSvcError(res, 403, 'SVC-POL-2001');
    expectTerminal(res);
    expect(res.body).toMatchObject({
      code: 'SVC-POL-2001',
      policy_id: policy.body.policy_id,
      message: 'custom adapters are not allowed',
      denied_action: 'execution:start',
    });
    for (const field of ['code', 'policy_id', 'message', 'denied_action'])
      expect(typeof res.body[field], field).toBe('string');
    expect((await cp.call('GET', '/v1/envelopes', { key })).body).toEqual([]);
  });

  it('422 with a BudgetError body when the budget cannot take the execution', async () => {
    const key = await withTenant();
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'one-run', type: 'cost', limits: { max_cost_usd: 5, max_executions: 1 } },
    });
    const budgetId = budget.body.budget_id as string;
    expect(
      (await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } })).status,
    ).toBe(201);
    const res = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    const error = expectSvcError(res, 422, 'SVC-BUD-3004');
    expectTerminal(res);
    expect(res.body).toMatchObject({
      code: 'SVC-BUD-3004',
      budget_id: budgetId,
      current_usage: 1,
      limit: 1,
      message: error.message,
    });
    expect(error.details).toMatchObject({ budget_id: budgetId, limit: 1, current: 1 });
    expect((await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key })).body.executions).toBe(1);
  });
});

describe('the structured error body of spec 7.1', () => {
  it('echoes the x-request-id of the request, and makes one up when none is sent', async () => {
    const key = await withTenant();
    const sent = await cp.call('GET', '/v1/budgets/nope', { key, headers: { 'x-request-id': 'trace-4711' } });
    expect(expectSvcError(sent, 404, 'SVC-BUD-3002').request_id).toBe('trace-4711');
    const made = await cp.call('GET', '/v1/budgets/nope', { key });
    const id = expectSvcError(made, 404, 'SVC-BUD-3002').request_id;
    expect(id).not.toBe('trace-4711');
    expect(String(id).length).toBeGreaterThan(8);
  });

  it('answers an unknown route with 404 SVC-SYS-9006', async () => {
    const key = await withTenant();
    expectSvcError(await cp.call('GET', '/v1/nothing-here', { key }), 404, 'SVC-SYS-9006');
    expectSvcError(await cp.call('POST', '/v2/envelopes', { key, body: {} }), 404, 'SVC-SYS-9006');
  });
});

describe('401 for missing, bad, revoked and expired credentials', () => {
  it('refuses each with SVC-SYS-9003 and x-should-retry: false', async () => {
    const key = await withTenant();
    const mint = async (body: Record<string, unknown>) =>
      (await cp.call('POST', '/v1/api-keys', { key, body })).body as { id: string; key_secret: string };
    const revoked = await mint({ name: 'revoked', scopes: ['budgets:read'] });
    const shortLived = await mint({ name: 'short', scopes: ['budgets:read'], expires_in_seconds: 1 });
    expect((await cp.call('GET', '/v1/budgets', { key: shortLived.key_secret })).status).toBe(200);
    expect((await cp.call('DELETE', `/v1/api-keys/${revoked.id}`, { key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));

    const tampered = `${key.slice(0, -4)}${key.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    for (const [what, credential] of [
      ['none', null],
      ['garbage', 'not-a-key'],
      ['tampered', tampered],
      ['revoked', revoked.key_secret],
      ['expired', shortLived.key_secret],
    ] as const) {
      const res = await cp.call('GET', '/v1/budgets', { key: credential });
      expect(res.status, what).toBe(401);
      expectSvcError(res, 401, 'SVC-SYS-9003');
      expectTerminal(res);
    }
    expect((await cp.call('GET', '/v1/budgets', { key })).status).toBe(200);
  });
});

describe('403 SVC-SYS-9004 for a missing scope', () => {
  it('lets a budgets:read key read budgets but not create one', async () => {
    const admin = await withTenant();
    const reader = (
      await cp.call('POST', '/v1/api-keys', { key: admin, body: { name: 'reader', scopes: ['budgets:read'] } })
    ).body.key_secret as string;
    expect((await cp.call('GET', '/v1/budgets', { key: reader })).status).toBe(200);
    const res = await cp.call('POST', '/v1/budgets', {
      key: reader,
      body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1 } },
    });
    expect(expectSvcError(res, 403, 'SVC-SYS-9004').details).toMatchObject({ required_scope: 'budgets:write' });
    expectTerminal(res);
    expectSvcError(
      await cp.call('POST', '/v1/envelopes', { key: reader, body: { adapter_type: 'custom' } }),
      403,
      'SVC-SYS-9004',
    );
    // Permission comes before validation: a caller that may not write learns nothing of the schema.
    expectSvcError(await cp.call('POST', '/v1/budgets', { key: reader, body: { name: 5 } }), 403, 'SVC-SYS-9004');
    expectSvcError(await cp.call('POST', '/v1/budgets', { key: reader, raw: '{"name":' }), 403, 'SVC-SYS-9004');
    expectSvcError(await cp.call('GET', '/v1/audit', { key: reader }), 403, 'SVC-SYS-9004');
    expect((await cp.call('GET', '/v1/budgets', { key: admin })).body).toEqual([]);
  });
});

describe('429 SVC-SYS-9005 per API key', () => {
  it('limits a key past rate_limit_per_minute with retry-after, and leaves other keys alone', async () => {
    const first = await withTenant({ rate_limit_per_minute: 5 }, clockEarlyInAMinute());
    const second = await tenantWithKey(cp, 'globex');
    for (let i = 0; i < 5; i += 1) {
      const passed = await cp.call('GET', '/v1/budgets', { key: first });
      expect(passed.status).toBe(200);
      expect(passed.headers.get('x-ratelimit-limit')).toBe('5');
      expect(passed.headers.get('x-ratelimit-remaining')).toBe(String(4 - i));
    }
    const limited = await cp.call('GET', '/v1/budgets', { key: first });
    expect(expectSvcError(limited, 429, 'SVC-SYS-9005').details).toMatchObject({ limit: 5 });
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Rate limiting is recoverable: clients may retry after the wait.
    expect(limited.headers.get('x-should-retry')).not.toBe('false');
    expect((await cp.call('GET', '/v1/budgets', { key: second })).status).toBe(200);
    expect(
      (
        await cp.call('POST', '/v1/budgets', {
          key: second,
          body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1 } },
        })
      ).status,
    ).toBe(201);
  });
});

describe('one rate limit per caller across REST and gRPC', () => {
  it('refuses a gRPC call with RESOURCE_EXHAUSTED SVC-SYS-9005 once REST calls used up the limit, and the other way round', async () => {
    const first = await withTenant({ rate_limit_per_minute: 4 }, clockEarlyInAMinute());
    const second = await tenantWithKey(cp, 'globex');
    const clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(cp.plane.grpcPort())}`);
    try {
      const listOverGrpc = (key: string) => unary(clients.client(COSTS), 'ListBudgets', {}, { defaultKey: key });
      for (let i = 0; i < 4; i += 1) expect((await cp.call('GET', '/v1/budgets', { key: first })).status).toBe(200);
      const refused = await failure(listOverGrpc(first));
      expect(refused.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(statusDetails(refused).errorInfo).toMatchObject({ reason: 'SVC-SYS-9005' });
      for (let i = 0; i < 4; i += 1) expect((await listOverGrpc(second)).budgets).toEqual([]);
      expectSvcError(await cp.call('GET', '/v1/budgets', { key: second }), 429, 'SVC-SYS-9005');
    } finally {
      clients.close();
    }
  });
});

describe('429 SVC-SYS-9005 per client address for failed authentications', () => {
  it('refuses an address past auth_failures_per_minute on REST, MCP and gRPC, a valid credential included', async () => {
    const key = await withTenant({ auth_failures_per_minute: 6 }, clockEarlyInAMinute());
    const clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(cp.plane.grpcPort())}`);
    try {
      const listOverGrpc = (credential: string) =>
        unary(clients.client(COSTS), 'ListBudgets', {}, { defaultKey: credential });
      const wrong = `${key.slice(0, -4)}xxxx`;
      // Sending no credential guesses nothing and is not counted.
      for (let i = 0; i < 10; i += 1)
        expectSvcError(await cp.call('GET', '/v1/budgets', { key: null }), 401, 'SVC-SYS-9003');
      for (let i = 0; i < 3; i += 1)
        expectSvcError(await cp.call('GET', '/v1/budgets', { key: wrong }), 401, 'SVC-SYS-9003');
      for (let i = 0; i < 2; i += 1) {
        const mcp = await cp.call('POST', '/mcp', { key: wrong, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
        expectSvcError(mcp, 401, 'SVC-SYS-9003');
      }
      expect((await failure(listOverGrpc(wrong))).code).toBe(status.UNAUTHENTICATED);

      const limited = await cp.call('GET', '/v1/budgets', { key: wrong });
      expect(expectSvcError(limited, 429, 'SVC-SYS-9005').details).toMatchObject({ limit: 6 });
      const retryAfter = Number(limited.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
      // A right guess is answered as a wrong one would be, so guessing stays useless.
      expectSvcError(await cp.call('GET', '/v1/budgets', { key }), 429, 'SVC-SYS-9005');
      expectSvcError(
        await cp.call('POST', '/mcp', { key, body: { jsonrpc: '2.0', id: 1, method: 'ping' } }),
        429,
        'SVC-SYS-9005',
      );
      const refused = await failure(listOverGrpc(key));
      expect(refused.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(statusDetails(refused).errorInfo).toMatchObject({ reason: 'SVC-SYS-9005' });
    } finally {
      clients.close();
    }
  });
});

describe('request ids', () => {
  it('echoes a sensible x-request-id and replaces an oversized or odd one', async () => {
    const cp = await startControlPlane();
    try {
      const kept = await cp.call('GET', '/v1/nowhere', { headers: { 'x-request-id': 'trace-42.a:b' } });
      expect(kept.headers.get('x-request-id')).toBe('trace-42.a:b');
      expect(kept.body.error.request_id).toBe('trace-42.a:b');
      for (const odd of ['x'.repeat(5000), 'has space', '<script>']) {
        const replaced = await cp.call('GET', '/v1/nowhere', { headers: { 'x-request-id': odd } });
        expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
        expect(replaced.body.error.request_id).toBe(replaced.headers.get('x-request-id'));
      }
    } finally {
      await cp.close();
    }
  });
});
