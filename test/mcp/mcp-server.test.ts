import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  expectSvcError,
  ROOT_KEY,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { clockEarlyInAMinute } from '../harness/minute-clock.ts';
import { callFails, callOk, mcpClient } from './mcp-client.ts';
import { withOffset } from '../harness/offset-time.ts';

const TOOLS = [
  'check_governance',
  'list_policies',
  'get_policy',
  'create_policy',
  'update_policy',
  'update_policy_status',
  'delete_policy',
  'list_budgets',
  'get_budget',
  'create_budget',
  'get_budget_status',
  'list_pending_approvals',
  'approve_action',
  'deny_action',
  'list_api_keys',
  'create_api_key',
  'revoke_api_key',
  'get_metrics',
  'get_audit_log',
];

let cp: RunningControlPlane;
let key: string;
let keyId: string;
let client: Client;
/** The id of the second key of the tenant that reviews what `key` asked for. */
let reviewerId: string;

/** A JSON-RPC request to /mcp as raw HTTP, for what the SDK client never sends. */
async function rawMcp(body: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) {
  const res = await fetch(`${cp.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? null : JSON.parse(text) };
}

/** The JSON-RPC error a call is refused with. */
async function rpcError(call: Promise<unknown>): Promise<McpError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpError);
  return error as McpError;
}

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'mcp-a');
  client = await mcpClient(cp.url, key);
  const config = await client.readResource({ uri: 'tenant://config' });
  keyId = JSON.parse(String((config.contents[0] as { text: string }).text)).credential.id;
}, 60_000);
afterAll(async () => {
  await client?.close();
  await cp.close();
});

describe('POST /mcp: transport and auth', () => {
  it('answers GET /mcp/health without a credential', async () => {
    const res = await cp.call('GET', '/mcp/health', { key: null });
    expect(res).toMatchObject({ status: 200, body: { service: 'mcp', status: 'ok' } });
  });

  it('refuses a missing or bad credential with 401 before any JSON-RPC work', async () => {
    const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer not-a-key' },
      { 'x-api-key': 'svc_nope_nope' },
    ];
    for (const headers of attempts) {
      const res = await rawMcp(list, headers);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('SVC-SYS-9003');
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
    // Not even a parse error is reported to a caller without a credential.
    expect((await rawMcp('{not json', {})).status).toBe(401);
    await expect(mcpClient(cp.url, 'wrong-key-wrong-key-wrong')).rejects.toThrow();
  });

  it('accepts the key as x-api-key too', async () => {
    const other = await mcpClient(cp.url, key, { header: 'x-api-key' });
    expect((await other.listTools()).tools).toHaveLength(19);
    await other.close();
  });

  it('answers malformed JSON -32700, a non-JSON-RPC body -32600, an unknown method -32601', async () => {
    const parse = await rawMcp('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(parse.status).toBe(400);
    expect(parse.body.error.code).toBe(-32700);
    const invalid = await rawMcp(JSON.stringify({ hello: 'world' }));
    expect(invalid.body.error.code).toBe(-32600);
    const empty = await rawMcp('[]');
    expect(empty.body.error.code).toBe(-32600);
    const unknown = await rawMcp(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/explode' }));
    expect(unknown.body).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32601 } });
  });

  it('acts for the credential’s tenant; only a platform administrator may name another with X-Tenant-ID', async () => {
    const { policy } = await callOk(client, 'create_policy', {
      name: 'tenant-probe',
      policy_type: 'custom',
      rules: { r: { action: 'tool:probe', effect: 'deny' } },
    });
    const root = await mcpClient(cp.url, ROOT_KEY, { headers: { 'x-tenant-id': 'mcp-a' } });
    expect((await callOk(root, 'get_policy', { policy_id: policy.id })).policy.name).toBe('tenant-probe');
    await root.close();
    const otherKey = await tenantWithKey(cp, 'mcp-other');
    const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const refused = await rawMcp(list, { authorization: `Bearer ${otherKey}`, 'x-tenant-id': 'mcp-a' });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('SVC-SYS-9004');
    const malformed = await rawMcp(list, { authorization: `Bearer ${ROOT_KEY}`, 'x-tenant-id': 'x'.repeat(5000) });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({
      code: 'SVC-SYS-9002',
      details: { field_violations: [{ field: 'X-Tenant-ID' }] },
    });
    await callOk(client, 'delete_policy', { policy_id: policy.id });
  });

  it('answers 405 to GET and DELETE: the endpoint is stateless', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${cp.url}/mcp`, { method, headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      await res.body?.cancel();
    }
  });
});

describe('tools/list', () => {
  it('lists exactly the 19 tools of spec 4.7 with their required inputs and enums', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
    const tool = (name: string) => tools.find((t) => t.name === name)!;
    const required = (name: string) => [...(tool(name).inputSchema.required ?? [])].sort();
    expect(required('check_governance')).toEqual(['action', 'input_text']);
    expect(required('get_policy')).toEqual(['policy_id']);
    expect(required('create_policy')).toEqual(['name', 'policy_type']);
    expect(required('update_policy')).toEqual(['policy_id']);
    expect(required('update_policy_status')).toEqual(['policy_id', 'status']);
    expect(required('delete_policy')).toEqual(['policy_id']);
    expect(required('get_budget')).toEqual(['budget_id']);
    expect(required('create_budget')).toEqual(['limit_amount', 'name', 'period']);
    expect(required('get_budget_status')).toEqual(['budget_id']);
    expect(required('approve_action')).toEqual(['approval_id']);
    expect(required('deny_action')).toEqual(['approval_id', 'reason']);
    expect(required('create_api_key')).toEqual(['name']);
    expect(required('revoke_api_key')).toEqual(['key_id']);
    for (const name of ['list_policies', 'list_budgets', 'list_pending_approvals', 'list_api_keys', 'get_metrics'])
      expect(required(name)).toEqual([]);
    const enumOf = (name: string, field: string) =>
      (tool(name).inputSchema.properties?.[field] as { enum?: string[] }).enum;
    expect(enumOf('create_policy', 'policy_type')).toEqual([
      'budget',
      'rate_limit',
      'content_filter',
      'approval',
      'custom',
    ]);
    expect(enumOf('update_policy_status', 'status')).toEqual(['ACTIVE', 'INACTIVE', 'DRAFT']);
    expect(enumOf('list_policies', 'status')).toEqual(['ACTIVE', 'INACTIVE', 'DRAFT', 'all']);
    expect(enumOf('list_budgets', 'status')).toEqual(['active', 'warning', 'exceeded', 'all']);
    expect(enumOf('create_budget', 'period')).toEqual(['DAILY', 'WEEKLY', 'MONTHLY', 'QUARTERLY']);
    expect(enumOf('create_budget', 'scope')).toEqual(['GLOBAL', 'TENANT', 'WORKFLOW', 'MODEL']);
    expect(enumOf('create_budget', 'action')).toEqual(['WARN', 'SOFT_LIMIT', 'HARD_LIMIT']);
    expect(enumOf('get_metrics', 'metric_type')).toEqual(['usage', 'cost', 'policy', 'all']);
    for (const t of tools) {
      expect(t.outputSchema?.type, t.name).toBe('object');
      expect(t.annotations?.openWorldHint, t.name).toBe(false);
      const readOnly = t.name.startsWith('list_') || t.name.startsWith('get_');
      expect(t.annotations?.readOnlyHint, t.name).toBe(readOnly);
    }
    expect(tool('delete_policy').annotations).toMatchObject({ destructiveHint: true, idempotentHint: false });
    expect(tool('revoke_api_key').annotations).toMatchObject({ destructiveHint: true, idempotentHint: true });
    expect(tool('create_budget').annotations).toMatchObject({ destructiveHint: false, idempotentHint: false });
  });
});

describe('tools/call', () => {
  it('names the invalid field with -32602', async () => {
    const error = await rpcError(client.callTool({ name: 'create_policy', arguments: { name: 'bad name!' } }));
    expect(error.code).toBe(-32602);
    expect(error.message).toMatch(/^MCP error -32602: invalid params: name: /);
    const fields = (error.data as { field_violations: Array<{ field: string }> }).field_violations.map((v) => v.field);
    expect(fields).toEqual(['name', 'policy_type']);
    // Integer-like keys would be read first, not in the order written: such rule ids are refused.
    const numbered = await rpcError(
      client.callTool({
        name: 'create_policy',
        arguments: {
          name: 'numbered',
          policy_type: 'custom',
          rules: {
            'block-shell': { action: 'tool:shell', effect: 'deny' },
            '2': { action: 'tool:*', effect: 'allow' },
          },
        },
      }),
    );
    expect(numbered.code).toBe(-32602);
    expect(numbered.data).toMatchObject({ code: 'SVC-SYS-9002', field_violations: [{ field: 'rules.2' }] });
    const deny = await rpcError(client.callTool({ name: 'deny_action', arguments: { approval_id: 'x' } }));
    expect(deny.message).toContain('reason');
    const unknown = await rpcError(client.callTool({ name: 'no_such_tool', arguments: {} }));
    expect(unknown.code).toBe(-32602);
  });

  it('answers a domain error as a result with isError and the SVC code', async () => {
    const error = await callFails(client, 'get_policy', { policy_id: 'no-such-policy' });
    expect(error).toMatchObject({
      code: 'SVC-POL-2002',
      details: { policy_id: 'no-such-policy' },
      retryable: false,
    });
    expect(error.documentation_url).toContain('SVC-POL-2002');
    expect((await callFails(client, 'get_budget', { budget_id: 'nope' })).code).toBe('SVC-BUD-3002');
    const metrics = String((await cp.call('GET', '/metrics', { key: null })).body);
    expect(metrics).toMatch(/svc_mcp_tool_calls_total\{tool="get_policy",outcome="SVC-POL-2002"\} [1-9]/);
    expect(metrics).toMatch(/svc_mcp_tool_calls_total\{tool="create_policy",outcome="SVC-SYS-9002"\} [1-9]/);
    const noRules = await rpcError(
      client.callTool({ name: 'create_policy', arguments: { name: 'x', policy_type: 'custom' } }),
    );
    expect(noRules.data).toMatchObject({ code: 'SVC-POL-2003', field_violations: [{ field: 'rules' }] });
  });

  it('creates a DRAFT policy that changes decisions on MCP and REST once ACTIVE, then updates and deletes it', async () => {
    const created = await callOk(client, 'create_policy', {
      name: 'no-shell',
      policy_type: 'content_filter',
      description: 'keeps agents off the shell',
      priority: 700,
      rules: { 'deny-shell': { action: 'tool:shell', effect: 'deny', message: 'no shell' } },
    });
    const policy = created.policy;
    expect(policy).toMatchObject({
      name: 'no-shell',
      type: 'content_filter',
      status: 'DRAFT',
      priority: 700,
      rules: { 'deny-shell': { action: 'tool:shell', decision: 'DENY' } },
    });
    const check = () => callOk(client, 'check_governance', { action: 'tool:shell', input_text: 'ls -la' });
    const rest = async (): Promise<string> =>
      String((await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'tool:shell' } })).body.effect);
    expect((await check()).decision).toBe('ALLOW');
    expect(await rest()).not.toBe('deny');

    const switched = await callOk(client, 'update_policy_status', { policy_id: policy.id, status: 'ACTIVE' });
    expect(switched).toMatchObject({ policy_id: policy.id, status: 'ACTIVE' });
    const denied = await check();
    expect(denied).toMatchObject({
      decision: 'DENY',
      allowed: false,
      matched_rules: [{ policy_id: policy.id, rule_id: 'deny-shell' }],
      actions: ['DENY'],
    });
    expect(await rest()).toBe('deny');
    expect((await cp.call('GET', `/v1/policies/${policy.id}`, { key })).body).toMatchObject({
      enabled: true,
      tags: { policy_type: 'content_filter' },
    });

    const listed = await callOk(client, 'list_policies', { status: 'ACTIVE' });
    expect(listed.policies.map((p: { id: string }) => p.id)).toContain(policy.id);
    expect((await callOk(client, 'list_policies', { status: 'DRAFT' })).policies).toEqual([]);
    const active = await client.readResource({ uri: 'policies://active' });
    expect(JSON.parse(String((active.contents[0] as { text: string }).text)).policies[0].id).toBe(policy.id);

    const updated = await callOk(client, 'update_policy', {
      policy_id: policy.id,
      priority: 650,
      rules: { 'warn-shell': { action: 'tool:shell', decision: 'WARN' } },
    });
    expect(updated.policy).toMatchObject({ priority: 650, version: 3, name: 'no-shell', status: 'ACTIVE' });
    expect((await check()).decision).toBe('WARN');
    expect((await callOk(client, 'get_policy', { policy_id: policy.id })).policy.rules).toEqual({
      'warn-shell': { name: 'warn-shell', action: 'tool:shell', decision: 'WARN', conditions: [] },
    });
    await callOk(client, 'update_policy_status', { policy_id: policy.id, status: 'INACTIVE' });
    expect((await callOk(client, 'list_policies', { status: 'INACTIVE' })).policies[0].id).toBe(policy.id);

    expect(await callOk(client, 'delete_policy', { policy_id: policy.id })).toMatchObject({ status: 'deleted' });
    expect((await callFails(client, 'get_policy', { policy_id: policy.id })).code).toBe('SVC-POL-2002');
    expect((await callFails(client, 'delete_policy', { policy_id: policy.id })).code).toBe('SVC-POL-2002');
    expectSvcError(await cp.call('GET', `/v1/policies/${policy.id}`, { key }), 404, 'SVC-POL-2002');
  });

  it('creates a budget whose status follows usage recorded through REST events', async () => {
    const { budget } = await callOk(client, 'create_budget', {
      name: 'team',
      limit_amount: 4,
      period: 'QUARTERLY',
      scope: 'WORKFLOW',
      scope_id: 'wf-7',
      action: 'SOFT_LIMIT',
      alert_thresholds: [50, 75],
    });
    expect(budget).toMatchObject({
      name: 'team',
      limit_amount: 4,
      period: 'QUARTERLY',
      scope: 'WORKFLOW',
      scope_id: 'wf-7',
      action: 'SOFT_LIMIT',
      alert_thresholds: [50, 75],
      status: 'active',
      spend_usd: 0,
    });
    expect((await cp.call('GET', `/v1/budgets/${budget.id}`, { key })).body).toMatchObject({
      period: 'quarterly',
      limits: { max_cost_usd: 4 },
      alerts: [
        { percent: 50, action: 'warn' },
        { percent: 75, action: 'warn' },
        { percent: 100, action: 'notify' },
      ],
    });
    const envelope = await cp.call('POST', '/v1/envelopes', {
      key,
      body: { budget_id: budget.id, adapter_type: 'custom' },
    });
    expect(envelope.status).toBe(201);
    const event = await cp.call('POST', `/v1/envelopes/${envelope.body.envelope_id}/events`, {
      key,
      body: {
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        model: 'gpt-4o',
        tokens: { input: 1000, output: 200 },
        cost_usd: 2.5,
      },
    });
    expect(event.status).toBe(202);
    const status = await eventually(
      () => callOk(client, 'get_budget_status', { budget_id: budget.id }),
      (s) => s.spend_usd === 2.5,
      10_000,
    );
    expect(status).toMatchObject({
      budget_id: budget.id,
      status: 'warning',
      limit_usd: 4,
      remaining_usd: 1.5,
      percent_used: 62.5,
      tokens_used: 1200,
      executions: 1,
    });
    const warning = await callOk(client, 'list_budgets', { status: 'warning' });
    expect(warning.budgets.map((b: { id: string }) => b.id)).toEqual([budget.id]);
    expect((await callOk(client, 'list_budgets', { status: 'exceeded' })).budgets).toEqual([]);
    expect((await callOk(client, 'get_budget', { budget_id: budget.id })).budget.spend_usd).toBe(2.5);
    const tenant = await client.readResource({ uri: 'tenant://status' });
    expect(JSON.parse(String((tenant.contents[0] as { text: string }).text))).toMatchObject({
      tenant_id: 'mcp-a',
      budgets: [{ budget_id: budget.id, status: 'warning' }],
    });
    const latest = await client.readResource({ uri: 'envelopes://latest' });
    expect(JSON.parse(String((latest.contents[0] as { text: string }).text)).envelopes[0]).toMatchObject({
      envelope_id: envelope.body.envelope_id,
      cost_summary: { cost_usd: 2.5 },
    });

    const metrics = await callOk(client, 'get_metrics', { metric_type: 'all' });
    expect(metrics.usage).toMatchObject({ events: 1, tokens_total: 1200, cost_usd: 2.5 });
    expect(metrics.usage.by_model).toEqual([
      { model: 'gpt-4o', events: 1, tokens_input: 1000, tokens_output: 200, cost_usd: 2.5 },
    ]);
    expect(metrics.policy.denials).toBeGreaterThanOrEqual(1);
    expect(metrics.policy.by_action.find((a: { action: string }) => a.action === 'tool:shell')).toBeDefined();
    const future = await callOk(client, 'get_metrics', { start_time: new Date(Date.now() + 60_000).toISOString() });
    expect(future.usage.events).toBe(0);
    expect(future.policy.evaluations).toBe(0);
    // Times with an offset are the instants they name, and come back in UTC.
    const before = Date.now() - 600_000;
    const since = await callOk(client, 'get_metrics', { metric_type: 'usage', start_time: withOffset(before, 300) });
    expect(since.usage.events).toBe(1);
    expect(since.start_time).toBe(new Date(before).toISOString());
    const until = await callOk(client, 'get_metrics', { metric_type: 'usage', end_time: withOffset(before, -180) });
    expect(until.usage.events).toBe(0);
    expect(until.end_time).toBe(new Date(before).toISOString());
    const model = await rpcError(
      client.callTool({
        name: 'create_budget',
        arguments: { name: 'm', limit_amount: 1, period: 'DAILY', scope: 'MODEL' },
      }),
    );
    expect(model).toMatchObject({
      code: -32602,
      data: { code: 'SVC-SYS-9002', field_violations: [{ field: 'scope' }] },
    });
  });

  it('creates an API key that works on REST with its scopes, lists it masked, and revokes it', async () => {
    const { api_key: created } = await callOk(client, 'create_api_key', {
      name: 'budget-reader',
      description: 'for the dashboards',
      scopes: ['budgets:read'],
    });
    expect(created.key_secret).toEqual(expect.any(String));
    expect((await cp.call('GET', '/v1/budgets', { key: created.key_secret })).status).toBe(200);
    expectSvcError(await cp.call('GET', '/v1/policies', { key: created.key_secret }), 403, 'SVC-SYS-9004');
    const { api_keys: keys } = await callOk(client, 'list_api_keys');
    const listed = keys.find((k: { id: string }) => k.id === created.id);
    expect(listed).toMatchObject({ name: 'budget-reader', status: 'active', prefix: created.key_hint.slice(0, 8) });
    expect(JSON.stringify(keys)).not.toContain(created.key_secret);

    const revoked = await callOk(client, 'revoke_api_key', { key_id: created.id });
    expect(revoked.api_key.status).toBe('revoked');
    expectSvcError(await cp.call('GET', '/v1/budgets', { key: created.key_secret }), 401, 'SVC-SYS-9003');
    expect((await callOk(client, 'revoke_api_key', { key_id: created.id })).api_key.status).toBe('revoked');
    expect((await callFails(client, 'revoke_api_key', { key_id: 'nope' })).code).toBe('SVC-SYS-9006');
  });

  it("creates a key with an expiring key only when it expires by the creator's expiry", async () => {
    const expiring = await cp.call('POST', '/v1/api-keys', {
      key,
      body: { name: 'mcp-week', scopes: ['admin'], expires_in_seconds: 600 },
    });
    const week = await mcpClient(cp.url, String(expiring.body.key_secret));
    try {
      const count = async () => (await callOk(client, 'list_api_keys', { page_size: 100 })).api_keys.length as number;
      const before = await count();
      for (const args of [{ name: 'forever' }, { name: 'longer', expires_in_seconds: 3600 }]) {
        const refused = await rpcError(week.callTool({ name: 'create_api_key', arguments: args }));
        expect(refused.code).toBe(-32602);
        expect(refused.data).toMatchObject({
          code: 'SVC-SYS-9002',
          field_violations: [{ field: 'expires_in_seconds' }],
        });
      }
      expect(await count()).toBe(before);
      const { api_key: bounded } = await callOk(week, 'create_api_key', { name: 'bounded', expires_in_seconds: 60 });
      expect(Date.parse(bounded.expires_at)).toBeLessThanOrEqual(Date.parse(String(expiring.body.expires_at)));
      expect(await count()).toBe(before + 1);
    } finally {
      await week.close();
    }
  });

  it('approves and denies pending approvals, reflected on REST; a decision is final', async () => {
    const { policy } = await callOk(client, 'create_policy', {
      name: 'payments-need-a-human',
      policy_type: 'approval',
      priority: 900,
      rules: { 'hitl-payments': { action: 'tool:payment*', effect: 'require_approval' } },
    });
    await callOk(client, 'update_policy_status', { policy_id: policy.id, status: 'ACTIVE' });
    const ask = async () => {
      const result = await callOk(client, 'check_governance', {
        action: 'tool:payment',
        input_text: 'pay 500 EUR',
        context: { workflow_id: 'wf-pay' },
      });
      expect(result).toMatchObject({ decision: 'REQUIRE_APPROVAL', allowed: false });
      return String(result.approval_id);
    };
    const first = await ask();
    const second = await ask();
    const pending = await callOk(client, 'list_pending_approvals', { workflow_id: 'wf-pay' });
    expect(pending.approvals.map((a: { approval_id: string }) => a.approval_id)).toEqual([first, second]);
    expect(pending.approvals[0]).toMatchObject({
      status: 'PENDING',
      action: 'tool:payment',
      context: { input_text: 'pay 500 EUR', workflow_id: 'wf-pay' },
      requested_by: { type: 'api_key', id: keyId },
    });
    expect((await callOk(client, 'list_pending_approvals', { limit: 1 })).approvals).toHaveLength(1);

    // The key that asked may not decide either way; a second key of the tenant does.
    for (const [tool, args] of [
      ['approve_action', { approval_id: first }],
      ['deny_action', { approval_id: first, reason: 'x' }],
    ] as const) {
      const self = await callFails(client, tool, args);
      expect(self).toMatchObject({ code: 'SVC-SYS-9004', details: { reason: 'requester_cannot_decide' } });
      expect(self.message).toContain('requested by this credential');
    }
    expect((await cp.call('GET', `/v1/approvals/${first}`, { key })).body.status).toBe('PENDING');
    const reviewerKey = await cp.call('POST', '/v1/api-keys', {
      key,
      body: { name: 'reviewer', scopes: ['policies:read', 'policies:write'] },
    });
    const reviewer = await mcpClient(cp.url, String(reviewerKey.body.key_secret));
    try {
      const config = await reviewer.readResource({ uri: 'tenant://config' });
      reviewerId = JSON.parse(String((config.contents[0] as { text: string }).text)).credential.id;
      const approved = await callOk(reviewer, 'approve_action', { approval_id: first, comment: 'within limits' });
      expect(approved.approval).toMatchObject({
        status: 'APPROVED',
        reviewer_id: reviewerId,
        review_note: 'within limits',
      });
      await callOk(reviewer, 'deny_action', { approval_id: second, reason: 'not this vendor' });
    } finally {
      await reviewer.close();
    }
    expect((await cp.call('GET', `/v1/approvals/${first}`, { key })).body).toMatchObject({
      status: 'APPROVED',
      reviewer_id: reviewerId,
    });
    expect((await cp.call('GET', `/v1/approvals/${second}`, { key })).body).toMatchObject({
      status: 'REJECTED',
      review_note: 'not this vendor',
    });
    const again = await callFails(client, 'approve_action', { approval_id: second });
    expect(again).toMatchObject({ code: 'SVC-POL-2006', details: { status: 'REJECTED' } });
    expect((await callFails(client, 'deny_action', { approval_id: 'nope', reason: 'x' })).code).toBe('SVC-POL-2005');
    expect((await callOk(client, 'list_pending_approvals', { workflow_id: 'wf-pay' })).approvals).toEqual([]);
  });

  it('audits every mutating tool with the key as actor, readable through get_audit_log filters', async () => {
    const { entries } = await callOk(client, 'get_audit_log', { resource_type: 'Policy', actor_id: keyId });
    const actions = entries.map((e: { action: string }) => e.action);
    for (const action of ['policy.create', 'policy.update', 'policy.delete']) expect(actions).toContain(action);
    for (const entry of entries) {
      expect(entry.actor).toEqual({ type: 'api_key', id: keyId });
      expect(entry.resource.type).toBe('Policy');
    }
    const approvals = await callOk(client, 'get_audit_log', { resource_type: 'Approval' });
    expect(approvals.entries.map((e: { action: string }) => e.action).sort()).toEqual([
      'approval.approve',
      'approval.reject',
    ]);
    expect(approvals.entries[0].changes).toMatchObject({ reviewer_id: reviewerId });
    const keys = await callOk(client, 'get_audit_log', { resource_type: 'APIKey', action: 'api_key.create' });
    expect(
      keys.entries.find((e: { changes: { name: string } }) => e.changes.name === 'budget-reader')?.changes,
    ).toMatchObject({
      description: 'for the dashboards',
    });
    expect((await callOk(client, 'get_audit_log', { resource_type: 'Budget', limit: 1 })).entries).toHaveLength(1);
    // The same records REST shows.
    const rest = await cp.call('GET', '/v1/audit?resource_type=approval', { key });
    expect(rest.body.map((r: { audit_id: string }) => r.audit_id)).toEqual(
      approvals.entries.map((e: { id: string }) => e.id),
    );
  });

  it('says get_audit_log is truncated when the read stopped at its bound before the limit or the log ended', async () => {
    const tenantKey = await tenantWithKey(cp, 'mcp-audit-bound');
    const own = await mcpClient(cp.url, tenantKey);
    try {
      await callOk(own, 'create_budget', { name: 'older', limit_amount: 1, period: 'MONTHLY' });
      const whole = await callOk(own, 'get_audit_log', { action: 'budget.create', limit: 10 });
      expect(whole.entries).toHaveLength(1);
      expect(whole.truncated).toBe(false);
      // More newer records than one read looks at, none of them a budget's.
      const { services, storage } = cp.plane;
      for (let batch = 0; batch < 11; batch += 1) {
        await storage.withTransaction(async (tx) => {
          for (let i = 0; i < 100; i += 1)
            await services.audit.append(tx, 'mcp-audit-bound', {
              actor: { type: 'system', id: 'filler' },
              action: 'filler.write',
              resource: { type: 'filler', id: `${batch}-${i}` },
              result: 'written',
            });
        });
      }
      const bounded = await callOk(own, 'get_audit_log', { action: 'budget.create', limit: 10 });
      expect(bounded.entries).toEqual([]);
      expect(bounded.truncated).toBe(true);
      // A limit the log fills is not truncated, however much more it holds.
      const full = await callOk(own, 'get_audit_log', { action: 'filler.write', limit: 5 });
      expect(full.entries).toHaveLength(5);
      expect(full.truncated).toBe(false);
    } finally {
      await own.close();
    }
  });

  it('shows policy evaluations, approvals and the ruleset version only to a key REST shows them to (policies:read)', async () => {
    await callOk(client, 'check_governance', { action: 'tool:metrics-probe', input_text: 'x' });
    const keyWith = async (scopes: string[]) => {
      const created = await cp.call('POST', '/v1/api-keys', { key, body: { name: scopes.join('+'), scopes } });
      expect(created.status).toBe(201);
      return String(created.body.key_secret);
    };
    const sidecar = await keyWith(['events:read', 'budgets:read']);
    const reviewer = await keyWith(['events:read', 'budgets:read', 'policies:read']);
    expect((await cp.call('GET', '/v1/policies', { key: sidecar })).status).toBe(403);
    expect((await cp.call('GET', '/v1/approvals', { key: sidecar })).status).toBe(403);
    const narrow = await mcpClient(cp.url, sidecar);
    const wide = await mcpClient(cp.url, reviewer);
    try {
      const refused = await callFails(narrow, 'get_metrics', { metric_type: 'policy' });
      expect(refused).toMatchObject({ code: 'SVC-SYS-9004', details: { required_scope: 'policies:read' } });
      const all = await callOk(narrow, 'get_metrics', { metric_type: 'all' });
      expect(all.usage).toBeDefined();
      expect(all.policy).toBeUndefined();
      expect(JSON.stringify(all)).not.toContain('tool:metrics-probe');
      const allowed = await callOk(wide, 'get_metrics', { metric_type: 'all' });
      expect(allowed.policy.by_action.map((a: { action: string }) => a.action)).toContain('tool:metrics-probe');

      const status = async (c: Client) => {
        const read = await c.readResource({ uri: 'tenant://status' });
        return JSON.parse(String((read.contents[0] as { text: string }).text)) as Record<string, unknown>;
      };
      const narrowStatus = await status(narrow);
      expect(narrowStatus).toMatchObject({ tenant_id: 'mcp-a', status: 'active' });
      expect(narrowStatus).not.toHaveProperty('pending_approvals');
      expect(narrowStatus).not.toHaveProperty('ruleset_version');
      const wideStatus = await status(wide);
      expect(wideStatus.pending_approvals).toEqual(expect.any(Number));
      expect(wideStatus.ruleset_version).toEqual(expect.any(Number));
    } finally {
      await narrow.close();
      await wide.close();
    }
  });

  it('refuses a read-only key a mutating tool with the SVC code, writing nothing', async () => {
    const reader = await cp.call('POST', '/v1/api-keys', {
      key,
      body: { name: 'reader', scopes: ['policies:read', 'budgets:read'] },
    });
    const readOnly = await mcpClient(cp.url, String(reader.body.key_secret));
    const before = (await callOk(client, 'list_policies')).policies.length;
    const refused = await callFails(readOnly, 'create_policy', {
      name: 'sneaky',
      policy_type: 'custom',
      rules: { r: { action: '*', effect: 'allow' } },
    });
    expect(refused).toMatchObject({ code: 'SVC-SYS-9004', details: { required_scope: 'policies:write' } });
    expect((await callFails(readOnly, 'create_api_key', { name: 'escalate' })).code).toBe('SVC-SYS-9004');
    expect((await callFails(readOnly, 'get_audit_log')).code).toBe('SVC-SYS-9004');
    expect((await callOk(readOnly, 'list_policies')).policies).toHaveLength(before);
    expect((await callOk(client, 'list_policies')).policies).toHaveLength(before);
    const audit = await callOk(client, 'get_audit_log', { actor_id: String(reader.body.id) });
    expect(audit.entries).toEqual([]);
    const resource = await rpcError(readOnly.readResource({ uri: 'envelopes://latest' }));
    expect(resource.data).toMatchObject({ code: 'SVC-SYS-9004' });
    await readOnly.close();
  });

  it('answers check_governance to a key without envelopes:write without opening an approval', async () => {
    const policy = await cp.call('POST', '/v1/policies', {
      key,
      body: {
        name: 'wires-need-a-human',
        priority: 800,
        rules: [{ action: 'tool:wire*', effect: 'require_approval' }],
      },
    });
    expect(policy.status).toBe(201);
    const reader = await cp.call('POST', '/v1/api-keys', {
      key,
      body: { name: 'policy-reader', scopes: ['policies:read'] },
    });
    const readOnly = await mcpClient(cp.url, String(reader.body.key_secret));
    try {
      const pending = async () =>
        (await callOk(client, 'list_pending_approvals', { limit: 1000 })).approvals.length as number;
      const before = await pending();
      const asked = await callOk(readOnly, 'check_governance', { action: 'tool:wire', input_text: 'wire 9000 EUR' });
      expect(asked).toMatchObject({ decision: 'REQUIRE_APPROVAL', allowed: false, approval_id: null });
      expect(await pending()).toBe(before);
      expect((await callOk(client, 'get_audit_log', { actor_id: String(reader.body.id) })).entries).toEqual([]);
      const recorded = await callOk(client, 'check_governance', { action: 'tool:wire', input_text: 'wire 9000 EUR' });
      expect(recorded.approval_id).toEqual(expect.any(String));
      expect(await pending()).toBe(before + 1);
    } finally {
      await readOnly.close();
    }
  });

  it('lists and reads the four resources as JSON', async () => {
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri).sort()).toEqual([
      'envelopes://latest',
      'policies://active',
      'tenant://config',
      'tenant://status',
    ]);
    for (const r of resources) {
      const read = await client.readResource({ uri: r.uri });
      const content = read.contents[0] as { uri: string; mimeType: string; text: string };
      expect(content).toMatchObject({ uri: r.uri, mimeType: 'application/json' });
      expect(typeof JSON.parse(content.text)).toBe('object');
    }
    expect((await rpcError(client.readResource({ uri: 'tenant://secrets' }))).code).toBe(-32602);
  });
});

describe('a result a client may trust', () => {
  it('carries text and structured content matching the output schema', async () => {
    const result = (await client.callTool({ name: 'list_budgets', arguments: {} })) as CallToolResult;
    expect(result.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/budgets$/) });
    expect(result.structuredContent).toHaveProperty('budgets');
  });
});

describe('rate limits', () => {
  it('count MCP requests per credential like REST ones (429 SVC-SYS-9005)', async () => {
    const limited = await startControlPlane({ rate_limit_per_minute: 3 }, undefined, undefined, clockEarlyInAMinute());
    try {
      const limitedKey = await tenantWithKey(limited, 'mcp-rl');
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${limited.url}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${limitedKey}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/list' }),
        });
        statuses.push(res.status);
        if (res.status === 429)
          expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SVC-SYS-9005');
        else await res.body?.cancel();
      }
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses.slice(3)).toEqual([429, 429]);
    } finally {
      await limited.close();
    }
  }, 60_000);

  it('count each message of a batch as a request', async () => {
    const limited = await startControlPlane({ rate_limit_per_minute: 5 }, undefined, undefined, clockEarlyInAMinute());
    try {
      const limitedKey = await tenantWithKey(limited, 'mcp-batch');
      const batch = (size: number) =>
        fetch(`${limited.url}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${limitedKey}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify(
            Array.from({ length: size }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'tools/list' })),
          ),
        });
      const first = await batch(3);
      expect(first.status).toBe(200);
      expect(((await first.json()) as unknown[]).length).toBe(3);
      // Two of the five are left: a batch of three passes the limit.
      const second = await batch(3);
      expect(second.status).toBe(429);
      expect(((await second.json()) as { error: { code: string } }).error.code).toBe('SVC-SYS-9005');
    } finally {
      await limited.close();
    }
  }, 60_000);
});
