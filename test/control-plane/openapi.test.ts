import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyCostTotals, MAX_TOKEN_TOTAL } from '../../core/domain/index.ts';
import { contractProblems, operationsOf, SchemaChecker, type OpenApiDocument } from '../fuzz/openapi-requests.ts';
import {
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

interface Operation {
  operationId?: string;
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

const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

beforeAll(async () => {
  const tokenFile = join(mkdtempSync(join(tmpdir(), 'metrics-')), 'token');
  writeFileSync(tokenFile, `${METRICS_TOKEN}\n`);
  cp = await startControlPlane({ metrics_token_file: tokenFile });
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

  it('documents exactly the routes the server registers', () => {
    // Fastify form to OpenAPI form: `:name` is a parameter, `::` a literal colon.
    const openApiPath = (url: string) =>
      url
        .split('::')
        .map((part) => part.replace(/:(\w+)/g, '{$1}'))
        .join(':');
    // The MCP endpoint speaks JSON-RPC (spec 4.7): its contract is the MCP schema, not this document.
    const registered = cp.plane.httpRoutes
      .filter((r) => r.method !== 'HEAD' && r.url !== '/mcp' && !r.url.startsWith('/mcp/'))
      .map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`)
      .sort();
    const documented = Object.entries(doc.paths)
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`))
      .sort();
    expect(registered.length).toBeGreaterThan(40);
    expect(registered).toEqual(documented);
  });

  it('documents DELETE /v1/budgets/{budget_id}, transcoded from CostService.DeleteBudget', () => {
    const operation = doc.paths['/v1/budgets/{budget_id}']?.delete;
    expect(operation?.operationId).toBe('CostService.DeleteBudget');
    expect(Object.keys(operation!.responses)).toEqual(expect.arrayContaining(['200', '401', '403', '404']));
  });

  it.each(['/v1/budgets', '/v1/policies'])(
    'documents the paging of GET %s: parameters and next-page header',
    (path) => {
      const operation = doc.paths[path]?.get as unknown as {
        parameters: Array<{ name: string; in: string }>;
        responses: Record<string, { headers?: Record<string, unknown> }>;
      };
      const query = operation.parameters.filter((p) => p.in === 'query').map((p) => p.name);
      expect(query).toEqual(expect.arrayContaining(['page_size', 'pageSize', 'page_token', 'pageToken']));
      expect(Object.keys(operation.responses['200']?.headers ?? {})).toEqual(['x-next-page-token']);
    },
  );

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
      services: { database: { status: 'ok' }, cache: { status: 'ok' }, event_bus: { status: 'ok' } },
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
    const metrics = await cp.call('GET', '/metrics', {
      key: null,
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
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
    // Without the token a scrape reads no tenant's budgets; with another one it is refused.
    const open = (await get('/metrics')).body as string;
    expect(open).toMatch(/^svc_policy_evaluations_total\{decision="ALLOW"\} 1$/m);
    expect(open).not.toContain('svc_budget_');
    expect(open).not.toContain('acme');
    const wrong = await cp.call('GET', '/metrics', { key: null, headers: { authorization: 'Bearer guessed' } });
    expect(wrong.status).toBe(401);
    expect((wrong.body as { error: { code: string } }).error.code).toBe('SVC-SYS-9003');
  });
});

describe('answers the fuzzer found outside the document', () => {
  const checker = new SchemaChecker();
  /** Calls an operation and returns the answer once it is checked against the document. */
  async function documented(
    method: string,
    template: string,
    path: string,
    options: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {},
  ) {
    const res = await cp.call(method, path, options);
    const op = operationsOf(doc as unknown as OpenApiDocument).find((o) => o.method === method && o.path === template);
    const answer = {
      status: res.status,
      contentType: res.headers.get('content-type') ?? '',
      text: JSON.stringify(res.body),
      json: res.body as unknown,
    };
    expect(contractProblems(op!, answer, checker)).toEqual([]);
    return res;
  }

  it('refuses a key lifetime past ten years, naming the bound, instead of a 500 or a year 16697', async () => {
    for (const seconds of [7_499_087_951_691_775, 400_000_000_000]) {
      const res = await documented('POST', '/v1/api-keys', '/v1/api-keys', {
        key,
        body: { name: 'far', expires_in_seconds: seconds },
      });
      const error = expectSvcError(res, 400, 'SVC-SYS-9002');
      expect(String(error.message)).toContain('expires_in_seconds');
      expect(String(error.message)).toContain('315360000');
    }
    const longest = await documented('POST', '/v1/api-keys', '/v1/api-keys', {
      key,
      body: { name: 'ten-years', expires_in_seconds: 315_360_000 },
    });
    expect(longest.status).toBe(201);
  });

  it('refuses event figures past the exact range, so totals stay exact and finite', async () => {
    const envelope = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    const id = (envelope.body as { envelope_id: string }).envelope_id;
    const event = (extra: Record<string, unknown>) => ({
      event_type: 'llm.call',
      timestamp: new Date().toISOString(),
      ...extra,
    });
    for (const body of [
      event({ tokens: { input: 9_007_199_254_740_991 } }),
      event({ cost_usd: 1.7976931348623157e308 }),
    ]) {
      const res = await documented('POST', '/v1/envelopes/{envelope_id}/events', `/v1/envelopes/${id}/events`, {
        key,
        body,
      });
      expect(expectSvcError(res, 400, 'SVC-SYS-9002').message).toMatch(/tokens\.input|cost_usd/);
    }
    const largest = event({ tokens: { input: 100_000_000, output: 100_000_000 }, cost_usd: 1_000_000 });
    for (let i = 0; i < 2; i++) {
      expect((await cp.call('POST', `/v1/envelopes/${id}/events`, { key, body: largest })).status).toBe(202);
    }
    const read = await documented('GET', '/v1/envelopes/{envelope_id}', `/v1/envelopes/${id}`, { key });
    expect(read.body.cost_summary).toMatchObject({
      tokens_input: 200_000_000,
      tokens_total: 400_000_000,
      cost_usd: 2_000_000,
    });
  });

  it('refuses whole an event that would carry a stored total past the exact range', async () => {
    const created = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    const id = (created.body as { envelope_id: string }).envelope_id;
    // A total near the maximum (reached by many calls): charged directly, as no test could post them all.
    await cp.plane.storage.withTransaction((tx) =>
      tx.envelopes.charge(
        'acme',
        id,
        { ...emptyCostTotals(), tokens_input: MAX_TOKEN_TOTAL - 10 },
        'refuse',
        new Date().toISOString(),
      ),
    );
    const before = await cp.call('GET', `/v1/envelopes/${id}`, { key });
    const res = await documented('POST', '/v1/envelopes/{envelope_id}/events', `/v1/envelopes/${id}/events`, {
      key,
      body: {
        event_id: 'overflow-1',
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        tokens: { input: 11 },
      },
    });
    const error = expectSvcError(res, 400, 'SVC-EVT-4002');
    expect(String(error.message)).toContain('tokens_input');
    expect((await cp.call('GET', `/v1/envelopes/${id}`, { key })).body).toEqual(before.body);
    const events = await cp.call('GET', `/v1/events?envelope_id=${id}`, { key });
    expect(events.body).toEqual([]);
  });

  it('documents the plain 403 of a tenant mismatch beside the PolicyViolation of a denial', async () => {
    const res = await documented('POST', '/v1/envelopes', '/v1/envelopes', {
      key,
      body: { tenant_id: 'umbrella', adapter_type: 'custom' },
    });
    expectSvcError(res, 403, 'SVC-SYS-9004');
  });

  it('answers an id longer than the router allows with an SVC error, not the framework body', async () => {
    const res = await documented('GET', '/v1/envelopes/{envelope_id}', `/v1/envelopes/${'e'.repeat(101)}`, { key });
    const error = expectSvcError(res, 400, 'SVC-SYS-9002');
    expect(String(error.message)).toContain('100 characters');
    const bad = await documented('GET', '/v1/budgets/{budget_id}', '/v1/budgets/%E0%A4%A', { key });
    expectSvcError(bad, 400, 'SVC-SYS-9002');
  });

  it('documents an unknown tenant named by the root key, and a repeated execution_id', async () => {
    const unknown = await documented('GET', '/v1/budgets', '/v1/budgets', { headers: { 'x-tenant-id': 'nobody' } });
    expectSvcError(unknown, 404, 'SVC-SYS-9006');
    const malformed = await documented('GET', '/v1/budgets', '/v1/budgets', {
      headers: { 'x-tenant-id': 'x'.repeat(5000) },
    });
    expectSvcError(malformed, 400, 'SVC-SYS-9002');
    const body = { adapter_type: 'custom', execution_id: 'run-42' };
    expect((await documented('POST', '/v1/envelopes', '/v1/envelopes', { key, body })).status).toBe(201);
    expectSvcError(await documented('POST', '/v1/envelopes', '/v1/envelopes', { key, body }), 409, 'SVC-SYS-9008');
  });

  it('documents approval_id in the result of an evaluation that requires approval', async () => {
    await tenantWithKey(cp, 'umbrella');
    const asUmbrella = { headers: { 'x-tenant-id': 'umbrella' } };
    expect(
      (
        await cp.call('POST', '/v1/policies', {
          ...asUmbrella,
          body: { name: 'ask', rules: [{ action: 'tool:deploy', effect: 'require_approval' }] },
        })
      ).status,
    ).toBe(201);
    const res = await documented('POST', '/v1/policies/evaluate', '/v1/policies/evaluate', {
      ...asUmbrella,
      body: { action: 'tool:deploy' },
    });
    expect(res.status).toBe(200);
    expect(res.body.approval_id).toEqual(expect.any(String));
  });
});
