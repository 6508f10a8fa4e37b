import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectSvcError,
  seedTenant,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
  type TenantResources,
} from '../harness/control-plane.ts';

/**
 * One bad request: `body` is sent as JSON, `raw` as is (with `contentType`). `field` is the
 * violation expected in error.details.field_violations; an unknown key is reported at the object
 * that holds it, with the key named in the description (`names`).
 */
interface BadRequest {
  what: string;
  body?: unknown;
  raw?: string;
  contentType?: string;
  field: string;
  names?: string;
  code?: string;
}

const now = new Date().toISOString();
/** JSON nested deeper than any store encoder's stack; it once failed the write with a 500. */
const deepJson = `{"a":${'['.repeat(20_000)}1${']'.repeat(20_000)}}`;
const malformed: BadRequest[] = [
  { what: 'malformed JSON', raw: '{"name": ', field: '(body)' },
  { what: 'a form-encoded body', raw: 'name=x', contentType: 'application/x-www-form-urlencoded', field: '(body)' },
  { what: 'an XML body', raw: '<name>x</name>', contentType: 'application/xml', field: '(body)' },
  { what: 'a JSON array', body: [1, 2], field: '(body)' },
];

let cp: RunningControlPlane;
let key: string;
let seed: TenantResources;

const ROUTES = [
  'envelopes',
  'events',
  'terminate',
  'status',
  'budgets',
  'check',
  'policies',
  'evaluate',
  'api-keys',
  'tenants',
] as const;

function routes(
  s: TenantResources,
): Record<(typeof ROUTES)[number], { path: string; root?: boolean; cases: BadRequest[] }> {
  const envelope = `/v1/envelopes/${s.envelopeId}`;
  const rule = (condition: Record<string, unknown>) => ({
    name: 'p',
    rules: [{ action: 'tool:*', effect: 'deny', conditions: [condition] }],
  });
  return {
    envelopes: {
      path: '/v1/envelopes',
      cases: [
        { what: 'wrong type', body: { budget_id: s.budgetId, adapter_type: 42 }, field: 'adapter_type' },
        { what: 'missing adapter_type', body: { budget_id: s.budgetId }, field: 'adapter_type' },
        { what: 'budget_id not a uuid', body: { budget_id: 'b-1', adapter_type: 'custom' }, field: 'budget_id' },
        {
          what: 'metadata nested too deep',
          raw: `{"budget_id":"${s.budgetId}","adapter_type":"custom","metadata":${deepJson}}`,
          field: 'metadata',
        },
        {
          what: 'execution_id with an unpaired surrogate',
          raw: `{"budget_id":"${s.budgetId}","adapter_type":"custom","execution_id":"x\\ud800"}`,
          field: 'execution_id',
        },
        {
          what: 'unknown field',
          body: { budget_id: s.budgetId, adapter_type: 'custom', colour: 'red' },
          field: '(body)',
          names: 'colour',
        },
      ],
    },
    events: {
      path: `${envelope}/events`,
      cases: [
        {
          what: 'wrong token type',
          body: { event_type: 'llm.call', timestamp: now, tokens: { input: 'many', output: 1 }, cost_usd: 1 },
          field: 'tokens.input',
        },
        { what: 'negative cost', body: { event_type: 'llm.call', timestamp: now, cost_usd: -1 }, field: 'cost_usd' },
        { what: 'missing timestamp', body: { event_type: 'llm.call', cost_usd: 1 }, field: 'timestamp' },
        {
          what: 'payload nested too deep',
          raw: `{"event_type":"llm.call","timestamp":"${now}","cost_usd":1,"payload":${deepJson}}`,
          field: 'payload',
        },
        {
          what: 'timestamp not a date-time',
          body: { event_type: 'llm.call', timestamp: 'yesterday', cost_usd: 1 },
          field: 'timestamp',
        },
        {
          what: 'timestamp finer than nanoseconds',
          body: { event_type: 'llm.call', timestamp: '2026-03-01T00:00:00.1234567890Z', cost_usd: 1 },
          field: 'timestamp',
        },
        {
          what: 'unknown nested field',
          body: { event_type: 'llm.call', timestamp: now, tokens: { input: 1, output: 1, cached: 5 }, cost_usd: 1 },
          field: 'tokens',
          names: 'cached',
        },
      ],
    },
    terminate: {
      path: `${envelope}/terminate`,
      cases: [
        { what: 'wrong type', body: { force: 'yes' }, field: 'force' },
        { what: 'unknown field', body: { reason: 'x', hard: true }, field: '(body)', names: 'hard' },
      ],
    },
    status: {
      path: `${envelope}/status`,
      cases: [
        { what: 'missing status', body: {}, field: 'status' },
        { what: 'wrong type', body: { status: 5 }, field: 'status' },
        { what: 'unknown status', body: { status: 'FLYING' }, field: 'status' },
      ],
    },
    budgets: {
      path: '/v1/budgets',
      cases: [
        {
          what: 'wrong limit type',
          body: { name: 'b', type: 'hybrid', limits: { max_tokens: 'lots' } },
          field: 'limits.max_tokens',
        },
        { what: 'missing name', body: { type: 'cost', limits: { max_cost_usd: 1 } }, field: 'name' },
        { what: 'unknown type', body: { name: 'b', type: 'money' }, field: 'type' },
        {
          what: 'alert percent out of range',
          body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1 }, alerts: [{ percent: 150 }] },
          field: 'alerts.0.percent',
        },
        {
          what: 'unknown limit',
          body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1, max_money: 2 } },
          field: 'limits',
          names: 'max_money',
        },
        {
          what: 'expiry in the past',
          body: { name: 'b', type: 'cost', limits: { max_cost_usd: 1 }, expires_at: '2001-01-01T00:00:00Z' },
          field: 'expires_at',
        },
      ],
    },
    check: {
      path: `/v1/budgets/${s.budgetId}/check`,
      cases: [
        { what: 'negative estimate', body: { estimated_tokens: -1 }, field: 'estimated_tokens' },
        { what: 'wrong type', body: { estimated_cost_usd: 'cheap' }, field: 'estimated_cost_usd' },
        { what: 'unknown field', body: { estimated_tokens: 1, model: 'x' }, field: '(body)', names: 'model' },
      ],
    },
    policies: {
      path: '/v1/policies',
      cases: [
        { what: 'missing rules', body: { name: 'p' }, field: 'rules' },
        {
          what: 'wrong priority type',
          body: { name: 'p', priority: 'high', rules: [{ action: '*', effect: 'deny' }] },
          field: 'priority',
        },
        {
          what: 'unknown operator',
          body: rule({ field: 'tool_name', operator: 'like', value: 'x' }),
          field: 'rules.0.conditions.0.operator',
        },
        {
          what: 'unknown field',
          body: { name: 'p', rules: [{ action: '*', effect: 'deny' }], colour: 'red' },
          field: '(body)',
          names: 'colour',
        },
        {
          what: 'condition value nested too deep',
          raw: `{"name":"p","rules":[{"action":"tool:*","effect":"deny","conditions":[{"field":"tool_name","operator":"equals","value":${deepJson}}]}]}`,
          field: 'rules.0.conditions.0.value',
        },
        {
          what: 'bad regex',
          body: rule({ field: 'tool_name', operator: 'matches', value: '([a-z' }),
          field: 'rules.0.conditions.0.value',
          code: 'SVC-POL-2003',
        },
        {
          what: 'backreference (not linear-time)',
          body: rule({ field: 'tool_name', operator: 'matches', value: '(a+)\\1' }),
          field: 'rules.0.conditions.0.value',
          code: 'SVC-POL-2003',
        },
        {
          what: 'in with a non-array',
          body: rule({ field: 'tool_name', operator: 'in', value: 'shell' }),
          field: 'rules.0.conditions.0.value',
          code: 'SVC-POL-2003',
        },
        {
          what: 'gt with a word',
          body: rule({ field: 'budget.percent_used', operator: 'gt', value: 'high' }),
          field: 'rules.0.conditions.0.value',
          code: 'SVC-POL-2003',
        },
      ],
    },
    evaluate: {
      path: '/v1/policies/evaluate',
      cases: [
        { what: 'missing action', body: { context: {} }, field: 'action' },
        { what: 'wrong context type', body: { action: 'tool:x', context: 'all' }, field: 'context' },
        { what: 'unknown field', body: { action: 'tool:x', verbose: true }, field: '(body)', names: 'verbose' },
        // An approval it opens keeps the context: nested this deep, it once failed the commit of
        // every transaction grouped with it, other tenants' too.
        { what: 'context nested too deep', raw: `{"action":"tool:x","context":${deepJson}}`, field: 'context' },
      ],
    },
    'api-keys': {
      path: '/v1/api-keys',
      cases: [
        { what: 'unknown scope', body: { name: 'k', scopes: ['root'] }, field: 'scopes.0' },
        { what: 'missing name', body: { scopes: ['admin'] }, field: 'name' },
        { what: 'negative expiry', body: { name: 'k', expires_in_seconds: -5 }, field: 'expires_in_seconds' },
        { what: 'unknown field', body: { name: 'k', secret: 'mine' }, field: '(body)', names: 'secret' },
      ],
    },
    tenants: {
      path: '/v1/tenants',
      root: true,
      cases: [
        { what: 'missing name', body: { tenant_id: 'fresh' }, field: 'name' },
        { what: 'wrong type', body: { name: 7 }, field: 'name' },
        { what: 'bad tenant id', body: { tenant_id: 'bad id!', name: 'x' }, field: 'tenant_id' },
        { what: 'unknown field', body: { name: 'x', plan: 'gold' }, field: '(body)', names: 'plan' },
      ],
    },
  };
}

/** All the state a bad request could touch: lists, the seeded envelope and budget, the audit chain. */
async function snapshot(): Promise<unknown> {
  const get = async (path: string, asRoot = false) =>
    (await cp.call('GET', path, asRoot ? {} : { key })).body as unknown;
  return {
    envelopes: await get('/v1/envelopes'),
    envelope: await get(`/v1/envelopes/${seed.envelopeId}`),
    budgets: await get('/v1/budgets'),
    usage: await get(`/v1/budgets/${seed.budgetId}/usage`),
    policies: await get('/v1/policies'),
    keys: await get('/v1/api-keys'),
    tenants: await get('/v1/tenants', true),
    audit: await get('/v1/audit?limit=1000'),
    rootAudit: await get('/v1/audit?limit=1000', true),
    verify: await get('/v1/audit/verify'),
  };
}

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
  seed = await seedTenant(cp, key);
});
afterAll(async () => cp.close());

describe('every POST route refuses a bad body with 400, names the field, and writes nothing', () => {
  it.each(ROUTES)('%s', async (name) => {
    const route = routes(seed)[name];
    const before = await snapshot();
    for (const bad of [...route.cases, ...malformed]) {
      const headers = bad.contentType === undefined ? undefined : { 'content-type': bad.contentType };
      const res = await cp.call('POST', route.path, {
        key: route.root ? undefined : key,
        body: bad.body,
        raw: bad.raw,
        ...(headers ? { headers } : {}),
      });
      const error = expectSvcError(res, 400, bad.code ?? 'SVC-SYS-9002');
      expect(res.headers.get('x-should-retry'), bad.what).toBe('false');
      const violations = (error.details as { field_violations: Array<{ field: string; description: string }> })
        .field_violations;
      const match = violations.find((v) => v.field === bad.field);
      expect(match, `${bad.what}: ${JSON.stringify(violations)}`).toBeDefined();
      if (bad.names !== undefined) expect(match!.description).toContain(bad.names);
    }
    expect(await snapshot()).toEqual(before);
  });
});

describe('an empty body is an absent body', () => {
  it('refuses it where a body is required and takes it as no body where the body is optional', async () => {
    const before = await snapshot();
    for (const path of ['/v1/budgets', '/v1/policies', `/v1/envelopes/${seed.envelopeId}/events`]) {
      const res = await cp.call('POST', path, { key, raw: '' });
      const error = expectSvcError(res, 400, 'SVC-SYS-9002');
      expect((error.details as { field_violations: unknown[] }).field_violations).toEqual([
        { field: '(body)', description: 'required' },
      ]);
    }
    expect(await snapshot()).toEqual(before);
    // TerminateRequest and BudgetCheckRequest are optional: a JSON content-type with nothing after it is fine.
    const check = await cp.call('POST', `/v1/budgets/${seed.budgetId}/check`, { key, raw: '' });
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({ allowed: true, remaining_cost_usd: 9.75 });
    const terminated = await cp.call('POST', `/v1/envelopes/${seed.envelopeId}/terminate`, { key, raw: '' });
    expect(terminated.status).toBe(200);
    expect(terminated.body.state).toBe('TERMINATED');
  });
});

describe('regular expressions in policies run in linear time', () => {
  it('accepts a pattern that backtracks catastrophically elsewhere and evaluates it at once', async () => {
    const pattern = '^(a+)+$';
    const created = await cp.call('POST', '/v1/policies', {
      key,
      body: {
        name: 'redos',
        rules: [
          {
            action: 'tool:*',
            effect: 'deny',
            conditions: [{ field: 'input_text', operator: 'matches', value: pattern }],
          },
        ],
      },
    });
    expect(created.status).toBe(201);
    const hostile = `${'a'.repeat(50_000)}!`;
    const started = performance.now();
    const res = await cp.call('POST', '/v1/policies/evaluate', {
      key,
      body: { action: 'tool:grep', context: { input_text: hostile } },
    });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(res.body).toMatchObject({ allowed: true, effect: 'no_match' });
    const matching = await cp.call('POST', '/v1/policies/evaluate', {
      key,
      body: { action: 'tool:grep', context: { input_text: 'aaaa' } },
    });
    expect(matching.body).toMatchObject({ allowed: false, effect: 'deny', matched_policy: created.body.policy_id });
  });
});
