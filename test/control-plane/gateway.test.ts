import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { listHttpRules } from '../../control-plane/grpc/http-rules.ts';
import {
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
}, 30_000);
afterAll(async () => cp.close());

describe('the HTTP gateway transcoded from the google.api.http bindings', () => {
  it('serves a route for every binding of a served method: REST where it has one, the transcoder for the rest', async () => {
    const doc = (await cp.call('GET', '/openapi.json', { key: null })).body as {
      paths: Record<string, Record<string, { operationId: string }>>;
    };
    const unrouted = listHttpRules(loadServedDefinition()).filter((rule) => {
      const path = rule.path.replace(/\{([^}]+)\}/g, (_m, v: string) => `{${v.split('.').at(-1) as string}}`);
      return doc.paths[path]?.[rule.verb.toLowerCase()] === undefined;
    });
    expect(unrouted.map((r) => r.method)).toEqual([]);
    expect(doc.paths['/v1/policies/batch-evaluate']?.post?.operationId).toBe('PolicyService.EvaluatePolicies');
    // REST keeps its own routes and shapes.
    expect(doc.paths['/v1/policies']?.get?.operationId).toBe('listPolicies');
    expect(Array.isArray((await cp.call('GET', '/v1/policies', { key })).body)).toBe(true);
  });

  it('answers GET /v1/budgets/{budget_id}/status in the proto3 JSON mapping', async () => {
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'b', type: 'cost', limits: { max_cost_usd: 10 }, alerts: [{ percent: 50, action: 'warn' }] },
    });
    const res = await cp.call('GET', `/v1/budgets/${String(budget.body.budget_id)}/status`, { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: {
        budget_id: budget.body.budget_id,
        status: 'BUDGET_STATUS_TYPE_ACTIVE',
        cost_usage_percent: 0,
        remaining: { max_cost_usd: 10 },
        current_spend: { total_tokens: '0', total_cost_usd: 0 },
        next_threshold: { threshold_percent: 50, action: 'THRESHOLD_ACTION_WARN' },
      },
    });
    expectSvcError(await cp.call('GET', '/v1/budgets/nope/status', { key }), 404, 'SVC-BUD-3002');
    expectSvcError(
      await cp.call('GET', `/v1/budgets/${String(budget.body.budget_id)}/status`, { key: null }),
      401,
      'SVC-SYS-9003',
    );
  });

  it('reports a budget past an alert threshold as WARNING on its status, and lists it by status=warning', async () => {
    const created = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'warned', type: 'cost', limits: { max_cost_usd: 10 }, alerts: [{ percent: 50, action: 'warn' }] },
    });
    const budgetId = String(created.body.budget_id);
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    await cp.call('POST', `/v1/envelopes/${String(env.body.envelope_id)}/events`, {
      key,
      body: { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: 6 },
    });
    const res = await cp.call('GET', `/v1/budgets/${budgetId}/status`, { key });
    expect(res.body.status).toMatchObject({
      status: 'BUDGET_STATUS_TYPE_WARNING',
      cost_usage_percent: 60,
      remaining: { max_cost_usd: 4 },
    });
    const ids = async (query: string) =>
      ((await cp.call('GET', `/v1/budgets${query}`, { key })).body as Array<{ budget_id: string }>).map(
        (b) => b.budget_id,
      );
    expect(await ids('?status=warning')).toEqual([budgetId]);
    // REST's own status (spec 2.3) has no warning: the budget is still active there.
    expect(await ids('?status=active')).toContain(budgetId);
    expect(await ids('?status=exhausted')).not.toContain(budgetId);
    expectSvcError(await cp.call('GET', '/v1/budgets?status=warm', { key }), 400, 'SVC-SYS-9002');
  });

  it('filters policies by ruleType or rule_type, and names a type it does not know', async () => {
    const created = await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'typed', rules: [{ action: 'tool:typed-only', effect: 'allow' }] },
    });
    const ids = async (query: string) =>
      ((await cp.call('GET', `/v1/policies${query}`, { key })).body as Array<{ policy_id: string }>).map(
        (p) => p.policy_id,
      );
    expect(await ids('')).toContain(created.body.policy_id);
    // Rules hold no type in this version: a named type selects none rather than everything.
    expect(await ids('?ruleType=TOOL_DENYLIST')).toEqual([]);
    expect(await ids('?rule_type=RULE_TYPE_TOOL_DENYLIST')).toEqual([]);
    const bad = expectSvcError(await cp.call('GET', '/v1/policies?ruleType=SHELL', { key }), 400, 'SVC-SYS-9002');
    expect(JSON.stringify(bad.details)).toContain('ruleType');
    await cp.call('DELETE', `/v1/policies/${String(created.body.policy_id)}`, { key });
  });

  it('evaluates a batch over POST /v1/policies/batch-evaluate, in snake_case or camelCase', async () => {
    await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'no-shell', rules: [{ action: 'tool:shell', effect: 'deny' }], priority: 300 },
    });
    const snake = await cp.call('POST', '/v1/policies/batch-evaluate', {
      key,
      body: {
        context: { tenant_id: 'acme', phase: 'EXECUTION_PHASE_PRE_TOOL_CALL', tool_names: ['shell'] },
        dry_run: true,
      },
    });
    expect(snake.status).toBe(200);
    expect(snake.body).toMatchObject({ final_decision: 'EVALUATION_DECISION_DENY', results: [{ allowed: false }] });
    const camel = await cp.call('POST', '/v1/policies/batch-evaluate', {
      key,
      body: {
        context: { phase: 'EXECUTION_PHASE_PRE_TOOL_CALL', toolNames: ['search'] },
        stopOnDeny: true,
        dryRun: true,
      },
    });
    expect(camel.body).toMatchObject({ final_decision: 'EVALUATION_DECISION_ALLOW' });
    const unknown = expectSvcError(
      await cp.call('POST', '/v1/policies/batch-evaluate', { key, body: { context: { phase: 'X' }, bogus: 1 } }),
      400,
      'SVC-SYS-9002',
    );
    expect(JSON.stringify(unknown.details)).toContain('bogus');
    expectSvcError(
      await cp.call('POST', '/v1/policies/batch-evaluate', {
        key,
        body: { context: { tenant_id: 'globex', phase: 'EXECUTION_PHASE_PRE_EXECUTION' } },
      }),
      403,
      'SVC-SYS-9004',
    );
  });

  it('reads an envelope cost summary at GET /v1/costs/{envelope_id}', async () => {
    const envelope = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    const res = await cp.call('GET', `/v1/costs/${String(envelope.body.envelope_id)}`, { key });
    expect(res.body).toEqual({
      cost_summary: {
        total_input_tokens: '0',
        total_output_tokens: '0',
        total_cost_usd: 0,
        llm_call_count: '0',
        tool_call_count: '0',
        model_costs: [],
      },
    });
  });

  it('routes the delete bindings with REST authentication and scopes', async () => {
    const paths = Object.keys((await cp.call('GET', '/openapi.json')).body.paths as Record<string, unknown>);
    expect(paths).toContain('/v1/spend');
    const reader = await tenantWithKey(cp, 'acme', ['budgets:read']);
    expectSvcError(await cp.call('DELETE', '/v1/policies/p1', { key: reader }), 403, 'SVC-SYS-9004');
    expectSvcError(await cp.call('DELETE', '/v1/policies/p1', { key }), 404, 'SVC-POL-2002');
    expectSvcError(await cp.call('DELETE', '/v1/budgets/b1', { key: reader }), 403, 'SVC-SYS-9004');
    expectSvcError(await cp.call('DELETE', '/v1/budgets/b1', { key }), 404, 'SVC-BUD-3002');
  });

  it('reads query parameters by their proto names, camelCase too, and refuses a bad one naming it as sent', async () => {
    const bad = expectSvcError(
      await cp.call('GET', '/v1/spend?groupBy=SPEND_GROUP_BY_NOPE', { key }),
      400,
      'SVC-SYS-9002',
    );
    expect(JSON.stringify(bad.details)).toContain('"field":"groupBy"');
    const spend = await cp.call('GET', '/v1/spend?groupBy=SPEND_GROUP_BY_DAY&start_time=2020-01-01T00:00:00Z', { key });
    expect(spend.status).toBe(200);
    expect(spend.body.spend_summary).toMatchObject({
      group_by: 'SPEND_GROUP_BY_DAY',
      start_time: '2020-01-01T00:00:00.000Z',
    });
    const offset = await cp.call('GET', `/v1/spend?start_time=${encodeURIComponent('2020-01-01T05:30:00.5+05:30')}`, {
      key,
    });
    expect(offset.body.spend_summary.start_time).toBe('2020-01-01T00:00:00.500Z');
  });
});
