import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { callOk, mcpClient } from '../mcp/mcp-client.ts';

/** Spec 8: every list answers 20 items unless asked, at most 100, with an opaque page token. */

const COUNT = 105;

let cp: RunningControlPlane;
let key: string;
let client: Client;
const budgetIds = new Set<string>();
const policyIds = new Set<string>();

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'paging-a');
  await tenantWithKey(cp, 'paging-b');
  for (let i = 0; i < COUNT; i++) {
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: `b-${i}`, type: 'cost', limits: { max_cost_usd: 5 } },
    });
    expect(budget.status).toBe(201);
    budgetIds.add(String(budget.body.budget_id));
    const policy = await cp.call('POST', '/v1/policies', {
      key,
      // Priorities repeat, so the order falls back on creation time and id.
      body: { name: `p-${i}`, priority: 100 + (i % 7), rules: [{ action: `tool:t${i}`, effect: 'deny' }] },
    });
    expect(policy.status).toBe(201);
    policyIds.add(String(policy.body.policy_id));
  }
  client = await mcpClient(cp.url, key);
}, 180_000);
afterAll(async () => {
  await client?.close();
  await cp?.close();
});

const lists = [
  { path: '/v1/budgets', id: 'budget_id', ids: () => budgetIds },
  { path: '/v1/policies', id: 'policy_id', ids: () => policyIds },
] as const;

describe.each(lists)('REST GET $path', ({ path, id, ids }) => {
  it('answers 20 by default and names the next page in X-Next-Page-Token', async () => {
    const res = await cp.call('GET', path, { key });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(20);
    expect(res.headers.get('x-next-page-token')).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('answers up to 100 and refuses 101 or 0 naming page_size', async () => {
    const res = await cp.call('GET', `${path}?page_size=100`, { key });
    expect(res.body).toHaveLength(100);
    for (const query of ['page_size=101', 'pageSize=0', 'page_size=ten']) {
      const refused = await cp.call('GET', `${path}?${query}`, { key });
      expect(String(expectSvcError(refused, 400, 'SVC-SYS-9002').message)).toMatch(/page_?[sS]ize/);
    }
  });

  it('walks every item exactly once, in either spelling of the parameters', async () => {
    const seen: string[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const query: string = token === null ? 'page_size=30' : `pageSize=30&pageToken=${token}`;
      const res = await cp.call('GET', `${path}?${query}`, { key });
      expect(res.status).toBe(200);
      seen.push(...(res.body as Array<Record<string, string>>).map((item) => item[id]!));
      token = res.headers.get('x-next-page-token');
      pages++;
    } while (token !== null);
    expect(pages).toBe(4);
    expect(seen).toHaveLength(COUNT);
    expect(new Set(seen)).toEqual(ids());
  });

  it('refuses a garbled or foreign token naming page_token', async () => {
    const other = lists.find((l) => l.path !== path)!;
    const foreign = (await cp.call('GET', other.path, { key })).headers.get('x-next-page-token');
    for (const token of ['not-a-token', '%21%21', foreign]) {
      const refused = await cp.call('GET', `${path}?page_token=${token}`, { key });
      expect(String(expectSvcError(refused, 400, 'SVC-SYS-9002').message)).toContain('page_token');
    }
  });

  it("pages only the caller's tenant", async () => {
    const res = await cp.call('GET', path, { key: await tenantWithKey(cp, 'paging-b') });
    expect(res.body).toEqual([]);
    expect(res.headers.get('x-next-page-token')).toBeNull();
  });
});

/** The data of the JSON-RPC invalid-params error a tool call is refused with. */
async function invalidParams(tool: string, args: Record<string, unknown>): Promise<unknown> {
  const error = await client.callTool({ name: tool, arguments: args }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpError);
  expect((error as McpError).code).toBe(-32602);
  return (error as McpError).data;
}

const tools = [
  { tool: 'list_budgets', field: 'budgets', id: 'id', ids: () => budgetIds },
  { tool: 'list_policies', field: 'policies', id: 'id', ids: () => policyIds },
] as const;

describe.each(tools)('MCP $tool', ({ tool, field, id, ids }) => {
  it('answers 20 by default with next_page_token, and up to 100', async () => {
    const first = await callOk(client, tool);
    expect(first[field]).toHaveLength(20);
    expect(first.next_page_token).toEqual(expect.any(String));
    expect((await callOk(client, tool, { page_size: 100 }))[field]).toHaveLength(100);
  });

  it('refuses page_size 101 or 0 naming the field', async () => {
    for (const page_size of [101, 0])
      expect(await invalidParams(tool, { page_size })).toMatchObject({
        code: 'SVC-SYS-9002',
        field_violations: [expect.objectContaining({ field: 'page_size' })],
      });
  });

  it('walks every item exactly once', async () => {
    const seen: string[] = [];
    let token: string | null = null;
    do {
      const page: Record<string, any> = await callOk(client, tool, {
        page_size: 40,
        ...(token === null ? {} : { page_token: token }),
      });
      seen.push(...(page[field] as Array<Record<string, string>>).map((item) => item[id]!));
      token = page.next_page_token as string | null;
    } while (token !== null);
    expect(seen).toHaveLength(COUNT);
    expect(new Set(seen)).toEqual(ids());
  });

  it('refuses a garbled or foreign token naming page_token', async () => {
    const other = tools.find((t) => t.tool !== tool)!;
    const foreign = String((await callOk(client, other.tool)).next_page_token);
    for (const page_token of ['bm90IGEgdG9rZW4', '!!', foreign])
      expect(await invalidParams(tool, { page_token })).toMatchObject({
        code: 'SVC-SYS-9002',
        field_violations: [expect.objectContaining({ field: 'page_token' })],
      });
  });
});

describe('API keys on REST and MCP', () => {
  const created = new Set<string>();

  beforeAll(async () => {
    // With the key the tenant was made with, 25: more than a default page.
    for (let i = 0; i < 24; i++) {
      const res = await cp.call('POST', '/v1/api-keys', { key, body: { name: `k-${i}`, scopes: ['budgets:read'] } });
      expect(res.status).toBe(201);
      created.add(String(res.body.id));
    }
  }, 60_000);

  it('pages GET /v1/api-keys: 20 by default, every key once, a foreign token refused', async () => {
    const first = await cp.call('GET', '/v1/api-keys', { key });
    expect(first.body).toHaveLength(20);
    const token = first.headers.get('x-next-page-token');
    const rest = await cp.call('GET', `/v1/api-keys?page_token=${token}`, { key });
    expect(rest.body).toHaveLength(5);
    expect(rest.headers.get('x-next-page-token')).toBeNull();
    const ids = new Set([...first.body, ...rest.body].map((k: { id: string }) => k.id));
    expect(ids.size).toBe(25);
    for (const id of created) expect(ids).toContain(id);
    // Budgets are ordered by the same kind of key: the token still names its own list.
    for (const list of ['/v1/budgets', '/v1/policies']) {
      const foreign = (await cp.call('GET', list, { key })).headers.get('x-next-page-token');
      const refused = await cp.call('GET', `/v1/api-keys?page_token=${foreign}`, { key });
      expect(String(expectSvcError(refused, 400, 'SVC-SYS-9002').message)).toContain('page_token');
    }
    expectSvcError(await cp.call('GET', '/v1/api-keys?page_size=101', { key }), 400, 'SVC-SYS-9002');
  });

  it('pages list_api_keys the same way', async () => {
    const first = await callOk(client, 'list_api_keys');
    expect(first.api_keys).toHaveLength(20);
    const rest = await callOk(client, 'list_api_keys', { page_token: first.next_page_token });
    expect(rest).toMatchObject({ next_page_token: null });
    expect(new Set([...first.api_keys, ...rest.api_keys].map((k: { id: string }) => k.id)).size).toBe(25);
    expect(await invalidParams('list_api_keys', { page_size: 101 })).toMatchObject({ code: 'SVC-SYS-9002' });
    expect(await invalidParams('list_api_keys', { page_token: 'xyz' })).toMatchObject({
      field_violations: [expect.objectContaining({ field: 'page_token' })],
    });
  });
});

/** Every item of a REST list walked `size` at a time with X-Next-Page-Token, and the page count. */
async function walk(
  path: string,
  size: number,
  idOf: (item: any) => string,
): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let token: string | null = null;
  let pages = 0;
  const join = path.includes('?') ? '&' : '?';
  do {
    const res = await cp.call('GET', `${path}${join}page_size=${size}${token === null ? '' : `&page_token=${token}`}`, {
      key,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids.push(...(res.body as unknown[]).map(idOf));
    token = res.headers.get('x-next-page-token');
    pages++;
  } while (token !== null);
  return { ids, pages };
}

describe('the lists that took `limit`: envelopes, events, audit', () => {
  let budgetId: string;
  let envelopeId: string;
  const envelopes = new Set<string>();

  beforeAll(async () => {
    budgetId = [...budgetIds][0]!;
    for (let i = 0; i < 25; i++) {
      const res = await cp.call('POST', '/v1/envelopes', {
        key,
        body: { budget_id: budgetId, adapter_type: 'langchain' },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      envelopes.add(String(res.body.envelope_id));
    }
    envelopeId = [...envelopes][0]!;
    for (let i = 0; i < 25; i++) {
      const res = await cp.call('POST', `/v1/envelopes/${envelopeId}/events`, {
        key,
        body: {
          event_type: 'llm.call',
          timestamp: new Date().toISOString(),
          model: 'gpt-4o',
          tokens: { input: 1, output: 1 },
        },
      });
      expect(res.status).toBe(202);
    }
  }, 60_000);

  it('pages GET /v1/envelopes, 20 by default, and still answers `limit` in one array', async () => {
    const first = await cp.call('GET', `/v1/envelopes?budget_id=${budgetId}`, { key });
    expect(first.body).toHaveLength(20);
    expect(first.headers.get('x-next-page-token')).not.toBeNull();
    const { ids, pages } = await walk(`/v1/envelopes?budget_id=${budgetId}`, 10, (e) => String(e.envelope_id));
    expect(pages).toBe(3);
    expect(new Set(ids)).toEqual(envelopes);
    expect(ids).toHaveLength(25);
    const limited = await cp.call('GET', `/v1/envelopes?budget_id=${budgetId}&limit=25`, { key });
    expect(limited.body).toHaveLength(25);
    expect(limited.headers.get('x-next-page-token')).toBeNull();
    expectSvcError(await cp.call('GET', '/v1/envelopes?page_size=101', { key }), 400, 'SVC-SYS-9002');
    const garbled = await cp.call('GET', '/v1/envelopes?page_token=not-a-token', { key });
    expect(String(expectSvcError(garbled, 400, 'SVC-SYS-9002').message)).toContain('page_token');
  });

  it('pages GET /v1/events', async () => {
    await eventually(
      () => cp.call('GET', `/v1/events?envelope_id=${envelopeId}&limit=100`, { key }),
      (res) => (res.body as unknown[]).length === 25,
      10_000,
    );
    expect((await cp.call('GET', `/v1/events?envelope_id=${envelopeId}`, { key })).body).toHaveLength(20);
    const { ids, pages } = await walk(`/v1/events?envelope_id=${envelopeId}`, 10, (e) => String(e.event_id));
    expect(pages).toBe(3);
    expect(new Set(ids).size).toBe(25);
    const garbled = await cp.call('GET', '/v1/events?page_token=not-a-token', { key });
    expect(String(expectSvcError(garbled, 400, 'SVC-SYS-9002').message)).toContain('page_token');
  });

  it('pages GET /v1/audit', async () => {
    const all = await cp.call('GET', '/v1/audit?action=budget.create&limit=1000', { key });
    expect(all.body.length).toBeGreaterThanOrEqual(COUNT);
    expect((await cp.call('GET', '/v1/audit?action=budget.create', { key })).body).toHaveLength(20);
    const { ids } = await walk('/v1/audit?action=budget.create', 100, (r) => String(r.audit_id));
    expect(ids).toEqual((all.body as Array<{ audit_id: string }>).map((r) => String(r.audit_id)));
    expectSvcError(await cp.call('GET', '/v1/audit?page_size=101', { key }), 400, 'SVC-SYS-9002');
  });
});

describe('GET /v1/approvals', () => {
  let approver: string;
  const wf1 = new Set<string>();

  beforeAll(async () => {
    approver = await tenantWithKey(cp, 'paging-approvals');
    const policy = await cp.call('POST', '/v1/policies', {
      key: approver,
      body: { name: 'hitl', priority: 500, rules: [{ action: 'tool:payment*', effect: 'require_approval' }] },
    });
    expect(policy.status).toBe(201);
    // Every other approval belongs to wf-1, so a page of wf-1 skips the others.
    for (let i = 0; i < 50; i++) {
      const res = await cp.call('POST', '/v1/policies/evaluate', {
        key: approver,
        body: { action: 'tool:payment', context: { workflow_id: `wf-${i % 2}`, n: i } },
      });
      expect(res.status).toBe(200);
      if (i % 2 === 1) wf1.add(String(res.body.approval_id));
    }
  }, 60_000);

  it('pages the filtered list full, every match once; `limit` alone answers one array', async () => {
    const first = await cp.call('GET', '/v1/approvals?workflow_id=wf-1', { key: approver });
    expect(first.body).toHaveLength(20);
    const rest = await cp.call(
      'GET',
      `/v1/approvals?workflow_id=wf-1&page_token=${first.headers.get('x-next-page-token')}`,
      {
        key: approver,
      },
    );
    expect(rest.body).toHaveLength(5);
    expect(rest.headers.get('x-next-page-token')).toBeNull();
    const ids = [...first.body, ...rest.body].map((a: { approval_id: string }) => a.approval_id);
    expect(new Set(ids)).toEqual(wf1);
    expect([...ids].sort()).toEqual(ids);
    expect((await cp.call('GET', '/v1/approvals?limit=50', { key: approver })).body).toHaveLength(50);
    expect((await cp.call('GET', '/v1/approvals?page_size=100', { key: approver })).body).toHaveLength(50);
    expectSvcError(await cp.call('GET', '/v1/approvals?page_size=101', { key: approver }), 400, 'SVC-SYS-9002');
    const garbled = await cp.call('GET', '/v1/approvals?page_token=not-a-token', { key: approver });
    expect(String(expectSvcError(garbled, 400, 'SVC-SYS-9002').message)).toContain('page_token');
  });
});
