import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';

interface Operation {
  security?: unknown[];
  requestBody?: unknown;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}
type OpenApi = { openapi: string; paths: Record<string, Record<string, Operation>> };

/** The routes of spec 4.1-4.3 and 4.5 (plus /version of 9.5), with the statuses each names. */
const SPEC_ROUTES: Array<[string, string, number[]]> = [
  ['post', '/v1/envelopes', [201, 403, 422]],
  ['get', '/v1/envelopes/{envelope_id}', [200, 404]],
  ['post', '/v1/envelopes/{envelope_id}/events', [202, 409]],
  ['post', '/v1/envelopes/{envelope_id}/terminate', [200, 409]],
  ['post', '/v1/budgets', [201]],
  ['get', '/v1/budgets', [200]],
  ['get', '/v1/budgets/{budget_id}', [200]],
  ['get', '/v1/budgets/{budget_id}/usage', [200]],
  ['post', '/v1/budgets/{budget_id}/check', [200]],
  ['post', '/v1/policies', [201]],
  ['get', '/v1/policies', [200]],
  ['get', '/v1/policies/{policy_id}', [200]],
  ['post', '/v1/policies/evaluate', [200]],
  ['get', '/health', [200]],
  ['get', '/health/live', [200]],
  ['get', '/health/ready', [200]],
  ['get', '/metrics', [200]],
  ['get', '/version', [200]],
];

let cp: RunningControlPlane;
let key: string;
let doc: OpenApi;

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
  const res = await cp.call('GET', '/openapi.json', { key: null });
  expect(res.status).toBe(200);
  doc = res.body as OpenApi;
});
afterAll(async () => cp.close());

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3.1 document the validator accepts', async () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    const result = await new Validator().validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it.each(SPEC_ROUTES)('documents %s %s with its statuses and the error responses', (method, path, statuses) => {
    const operation = doc.paths[path]?.[method];
    expect(operation, `${method} ${path}`).toBeDefined();
    const documented = Object.keys(operation!.responses).map(Number);
    expect(documented).toEqual(expect.arrayContaining(statuses));
    if (operation!.security?.length === 0) return;
    // Authenticated routes: every error a client can meet is described with a JSON body.
    const errors = [401, 403, 429, ...(operation!.requestBody !== undefined || path.includes('{') ? [400] : [])];
    for (const status of [...errors, ...statuses.filter((s) => s >= 400)]) {
      expect(
        operation!.responses[String(status)]?.content?.['application/json']?.schema,
        `${method} ${path} ${status}`,
      ).toBeDefined();
    }
  });
});

describe('operational endpoints', () => {
  const get = (path: string) => cp.call('GET', path, { key: null });

  it('reports health per dependency, liveness and readiness', async () => {
    const health = await get('/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({
      status: 'ok',
      version: expect.any(String) as unknown,
      services: { database: { status: 'ok' }, event_bus: { status: 'ok' } },
    });
    expect((await get('/health/live')).status).toBe(200);
    const ready = await get('/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ok' });
  });

  it('reports versions with the storage schema version', async () => {
    const version = await get('/version');
    expect(version.body).toMatchObject({
      service: 'control-plane',
      api_version: 'v1',
      version: expect.any(String) as unknown,
    });
    expect((version.body as { schema_version: number }).schema_version).toBeGreaterThanOrEqual(1);
  });

  it('exposes the metrics of spec 4.5 with values from real traffic', async () => {
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'b', type: 'cost', limits: { max_cost_usd: 10 } },
    });
    const budgetId = (budget.body as { budget_id: string }).budget_id;
    const envelope = await cp.call('POST', '/v1/envelopes', {
      key,
      body: { budget_id: budgetId, adapter_type: 'custom' },
    });
    const envelopeId = (envelope.body as { envelope_id: string }).envelope_id;
    for (const cost of [0.25, 0.5]) {
      await cp.call('POST', `/v1/envelopes/${envelopeId}/events`, {
        key,
        body: { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: cost },
      });
    }
    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    const text = metrics.body as string;
    // Envelope creation evaluated execution:start once with no policy: one ALLOW.
    expect(text).toMatch(/^svc_policy_evaluations_total\{decision="ALLOW"\} 1$/m);
    expect(text).toMatch(/^svc_policy_latency_seconds_count 1$/m);
    expect(text).toContain(`svc_budget_usage_dollars{tenant_id="acme",budget_id="${budgetId}"} 0.75`);
    expect(text).toMatch(
      /^svc_http_requests_total\{method="POST",route="\/v1\/envelopes\/:envelope_id\/events",status="202"\} 2$/m,
    );
  });
});
