import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';

let cp: RunningControlPlane;
let key: string;
beforeEach(async () => {
  // The alert receiver below is a plain-HTTP server on loopback: allowed here by configuration.
  cp = await startControlPlane({ webhook_allow_http: true, webhook_allowed_hosts: '127.0.0.1' });
  key = await tenantWithKey(cp, 'acme');
});
afterEach(async () => cp.close());

const now = () => new Date().toISOString();
const subjectsOf = (cp: RunningControlPlane) => cp.published.map((m) => m.subject);

async function budget(limits: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await cp.call('POST', '/v1/budgets', { key, body: { name: 'team', type: 'cost', limits, ...extra } });
  expect(res.status).toBe(201);
  return res.body.budget_id as string;
}

async function envelope(budgetId: string, extra: Record<string, unknown> = {}) {
  return cp.call('POST', '/v1/envelopes', {
    key,
    body: { tenant_id: 'acme', budget_id: budgetId, adapter_type: 'langchain', ...extra },
  });
}

describe('flow 1: execution start', () => {
  it('authorizes an envelope after the policy check and budget validation, and announces it', async () => {
    const budgetId = await budget({ max_cost_usd: 10 });
    const res = await envelope(budgetId, { metadata: { team: 'search' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      tenant_id: 'acme',
      budget_id: budgetId,
      adapter_type: 'langchain',
      state: 'AUTHORIZED',
      termination_reason: null,
    });
    expect(res.body.cost_summary).toEqual({
      tokens_input: 0,
      tokens_output: 0,
      tokens_total: 0,
      cost_usd: 0,
      llm_calls: 0,
      tool_calls: 0,
    });
    await eventually(
      () => subjectsOf(cp),
      (s) => s.includes('svc.acme.envelopes.created'),
    );
    const fetched = await cp.call('GET', `/v1/envelopes/${res.body.envelope_id}`, { key });
    expect(fetched.body).toEqual(res.body);
    const usage = await cp.call('GET', `/v1/budgets/${budgetId}/usage`, { key });
    expect(usage.body.executions).toBe(1);
  });
});

describe('flow 2: mid-execution budget enforcement', () => {
  it('warns at 80 %, and at 100 % raises exceeded, terminates the envelope and refuses further events', async () => {
    const budgetId = await budget({ max_cost_usd: 1 });
    const created = await envelope(budgetId);
    const id = created.body.envelope_id as string;
    const record = (cost: number, input = 100, output = 50) =>
      cp.call('POST', `/v1/envelopes/${id}/events`, {
        key,
        body: { event_type: 'llm.call', timestamp: now(), model: 'gpt-4o', tokens: { input, output }, cost_usd: cost },
      });

    const first = await record(0.5);
    expect(first.status).toBe(202);
    expect(first.body.state).toBe('RUNNING');
    expect(subjectsOf(cp)).not.toContain('svc.acme.budgets.warning');

    expect((await record(0.35)).status).toBe(202);
    await eventually(
      () => subjectsOf(cp),
      (s) => s.includes('svc.acme.budgets.warning'),
    );
    const warning = cp.published.find((m) => m.subject === 'svc.acme.budgets.warning')!.data as Record<string, unknown>;
    expect(warning).toMatchObject({ budget_id: budgetId, level: 'warning', threshold_percent: 80, percent_used: 85 });

    const crossing = await record(0.2);
    expect(crossing.status).toBe(202);
    expect(crossing.body.state).toBe('TERMINATED');
    await eventually(
      () => subjectsOf(cp),
      (s) => s.includes('svc.acme.budgets.exceeded') && s.includes('svc.acme.envelopes.terminated'),
    );
    expect(subjectsOf(cp).filter((s) => s === 'svc.acme.budgets.warning')).toHaveLength(1);

    const ended = await cp.call('GET', `/v1/envelopes/${id}`, { key });
    expect(ended.body).toMatchObject({ state: 'TERMINATED', termination_reason: 'budget_exceeded' });
    expect(ended.body.cost_summary).toMatchObject({
      tokens_input: 300,
      tokens_output: 150,
      tokens_total: 450,
      cost_usd: 1.05,
      llm_calls: 3,
    });

    const refused = await record(0.01);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('SVC-ENV-1003');

    const next = await envelope(budgetId);
    expect(next.status).toBe(422);
    expect(next.body).toMatchObject({ code: 'SVC-BUD-3001', budget_id: budgetId, current_usage: 1.05, limit: 1 });
    expect(next.body.error).toMatchObject({
      code: 'SVC-BUD-3001',
      details: { budget_id: budgetId, limit: 1, current: 1.05 },
    });

    const listed = await cp.call('GET', '/v1/budgets?status=exhausted', { key });
    expect(listed.body.map((b: { budget_id: string }) => b.budget_id)).toEqual([budgetId]);
  });

  it('prices an event without cost_usd from the model price table and counts a replayed event once', async () => {
    const budgetId = await budget({ max_cost_usd: 100 });
    const id = (await envelope(budgetId)).body.envelope_id as string;
    const body = {
      event_id: 'evt-1',
      event_type: 'llm.call',
      timestamp: now(),
      model: 'gpt-4o-2024-08-06',
      tokens: { input: 1_000_000, output: 100_000 },
    };
    expect((await cp.call('POST', `/v1/envelopes/${id}/events`, { key, body })).body.duplicate).toBe(false);
    expect((await cp.call('POST', `/v1/envelopes/${id}/events`, { key, body })).body.duplicate).toBe(true);
    const tool = await cp.call('POST', `/v1/envelopes/${id}/events`, {
      key,
      body: { event_type: 'tool.invoke', timestamp: now(), payload: { tool: 'search' } },
    });
    expect(tool.status).toBe(202);
    const env = await cp.call('GET', `/v1/envelopes/${id}`, { key });
    // gpt-4o list price: 2.50 USD per million input tokens, 10.00 per million output tokens.
    expect(env.body.cost_summary).toMatchObject({
      tokens_input: 1_000_000,
      tokens_output: 100_000,
      cost_usd: 3.5,
      llm_calls: 1,
      tool_calls: 1,
    });
  });

  it('ends an envelope that reaches its own governance token limit', async () => {
    const budgetId = await budget({ max_cost_usd: 100 });
    const id = (await envelope(budgetId, { governance_context: { token_limit: 1000 } })).body.envelope_id as string;
    const res = await cp.call('POST', `/v1/envelopes/${id}/events`, {
      key,
      body: { event_type: 'llm.call', timestamp: now(), tokens: { input: 900, output: 200 }, cost_usd: 0.01 },
    });
    expect(res.body.state).toBe('TERMINATED');
    const env = await cp.call('GET', `/v1/envelopes/${id}`, { key });
    expect(env.body).toMatchObject({
      termination_reason: 'budget_exceeded',
      status_reason: 'envelope token_limit 1000 reached',
    });
  });
});

describe('alert webhooks', () => {
  let server: Server;
  const received: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
  let failFirst = true;
  beforeEach(async () => {
    received.length = 0;
    failFirst = true;
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.statusCode = failFirst ? 503 : 204;
        failFirst = false;
        res.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterEach(async () => new Promise<void>((r) => server.close(() => r())));

  it('delivers a signed alert once per threshold and retries a failed delivery', async () => {
    const rotated = await cp.call('POST', '/v1/webhook-secret/rotate', { key });
    expect(rotated.status).toBe(200);
    const secret = rotated.body.webhook_secret as string;
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const budgetId = await budget(
      { max_cost_usd: 1 },
      { alerts: [{ percent: 50, action: 'notify', webhook_url: url }] },
    );
    const id = (await envelope(budgetId)).body.envelope_id as string;
    for (const cost of [0.3, 0.3, 0.1]) {
      await cp.call('POST', `/v1/envelopes/${id}/events`, {
        key,
        body: { event_type: 'llm.call', timestamp: now(), cost_usd: cost },
      });
    }
    await eventually(
      () => received.length,
      (n) => n >= 2,
      10_000,
    );
    await cp.plane.webhooks.idle();
    expect(received).toHaveLength(2);
    const [failed, delivered] = received;
    expect(failed!.headers['x-svc-delivery']).toBe(delivered!.headers['x-svc-delivery']);
    expect(delivered!.headers['x-svc-attempt']).toBe('2');
    const expected = `sha256=${createHmac('sha256', secret)
      .update(`${String(delivered!.headers['x-svc-timestamp'])}.${delivered!.body}`)
      .digest('hex')}`;
    // Newest key first; the replaced one signs too during the rotation's grace period.
    const signatures = String(delivered!.headers['x-svc-signature']).split(',');
    expect(signatures).toHaveLength(2);
    expect(signatures[0]).toBe(expected);
    expect(JSON.parse(delivered!.body)).toMatchObject({
      type: 'budget.warning',
      budget_id: budgetId,
      threshold_percent: 50,
      action: 'notify',
    });
  });
});

describe('flow 3: policy violation', () => {
  /** A policy that denies `execution:start` where `field` equals `value`. */
  async function denyStart(name: string, field: string, value: string) {
    const policy = await cp.call('POST', '/v1/policies', {
      key,
      body: {
        name,
        rules: [{ action: 'execution:start', effect: 'deny', conditions: [{ field, operator: 'eq', value }] }],
        priority: 500,
      },
    });
    expect(policy.status).toBe(201);
    return policy;
  }

  it('refuses an execution a policy denies with a PolicyViolation body and a violation event', async () => {
    const policy = await denyStart('no-langchain', 'adapter_type', 'langchain');
    const budgetId = await budget({ max_cost_usd: 10 });
    const res = await envelope(budgetId);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({
      code: 'SVC-POL-2001',
      policy_id: policy.body.policy_id,
      denied_action: 'execution:start',
    });
    expect(res.body.error).toMatchObject({
      code: 'SVC-POL-2001',
      request_id: expect.any(String),
      documentation_url: expect.stringContaining('SVC-POL-2001'),
    });
    await eventually(
      () => subjectsOf(cp),
      (s) => s.includes('svc.acme.policies.violation'),
    );
    const ok = await envelope(budgetId, { adapter_type: 'custom' });
    expect(ok.status).toBe(201);
    const audit = await cp.call('GET', '/v1/audit?action=policy.evaluate', { key });
    expect(audit.body.map((r: { result: string }) => r.result)).toEqual(['allow', 'deny']);
  });

  it("judges an execution by its budget's workflow, which the caller cannot name otherwise", async () => {
    const policy = await denyStart('no-payroll-runs', 'workflow_id', 'payroll');
    const payroll = await budget({ max_cost_usd: 10 }, { workflow_id: 'payroll' });
    const denied = await envelope(payroll, { metadata: { workflow_id: 'reports' } });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ code: 'SVC-POL-2001', policy_id: policy.body.policy_id });
    expect((await envelope(await budget({ max_cost_usd: 10 }, { workflow_id: 'reports' }))).status).toBe(201);
    expect((await envelope(await budget({ max_cost_usd: 10 }))).status).toBe(201);
  });

  it('leaves the choice of a policy_set to policy authors, and refuses one naming no policy', async () => {
    const denial = await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'no-starts', rules: [{ action: 'execution:start', effect: 'deny' }], priority: 900 },
    });
    const allowAll = await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'allow-all', rules: [{ action: '*', effect: 'allow' }], priority: 1 },
    });
    expect([denial.status, allowAll.status]).toEqual([201, 201]);
    const budgetId = await budget({ max_cost_usd: 10 });
    const agent = await cp.call('POST', '/v1/api-keys', {
      key,
      body: { name: 'agent', scopes: ['envelopes:write', 'envelopes:read'] },
    });
    const asAgent = (policySet: string[]) =>
      cp.call('POST', '/v1/envelopes', {
        key: agent.body.key_secret as string,
        body: { budget_id: budgetId, adapter_type: 'custom', policy_set: policySet },
      });
    // The governed party naming a set without the denial, or a set of nothing, walked past it.
    for (const set of [['allow-all'], ['anything']]) {
      const res = await asAgent(set);
      expect(res.status, set[0]).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'SVC-SYS-9004', details: { required_scope: 'policies:write' } });
    }
    const unknown = await cp.call('POST', '/v1/envelopes', {
      key,
      body: { budget_id: budgetId, adapter_type: 'custom', policy_set: ['anything'] },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: 'SVC-POL-2002', details: { field: 'policy_set.0' } });
    const evaluated = await cp.call('POST', '/v1/policies/evaluate', {
      key,
      body: { action: 'execution:start', policy_set: ['anything'], context: {} },
    });
    expect(evaluated.status).toBe(404);
    // A policy author may narrow it: the set without the denial allows.
    const narrowed = await cp.call('POST', '/v1/envelopes', {
      key,
      body: { budget_id: budgetId, adapter_type: 'custom', policy_set: ['allow-all'] },
    });
    expect(narrowed.status).toBe(201);
    expect((await envelope(budgetId, { adapter_type: 'custom' })).status).toBe(403);
  });

  it('evaluates a tool invocation: deny, higher-priority allow, and no match', async () => {
    await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'no-tools', rules: [{ action: 'tool:*', effect: 'deny' }], priority: 100 },
    });
    await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'search-ok', rules: [{ action: 'tool:search', effect: 'allow' }], priority: 200 },
    });
    const denied = await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'tool:shell', context: {} } });
    expect(denied.body).toMatchObject({ allowed: false, effect: 'deny' });
    const allowed = await cp.call('POST', '/v1/policies/evaluate', {
      key,
      body: { action: 'tool:search', context: {} },
    });
    expect(allowed.body).toMatchObject({ allowed: true, effect: 'allow' });
    const none = await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'llm:gpt-4o', context: {} } });
    expect(none.body).toMatchObject({ allowed: true, effect: 'no_match' });
    expect(typeof none.body.evaluation_time_ms).toBe('number');
  });
});

describe('envelope status transitions', () => {
  it('follows the transitions of UpdateEnvelopeStatus and refuses the rest', async () => {
    const budgetId = await budget({ max_cost_usd: 10 });
    const id = (await envelope(budgetId)).body.envelope_id as string;
    const move = (status: string) => cp.call('POST', `/v1/envelopes/${id}/status`, { key, body: { status } });
    expect((await move('PAUSED')).body.state).toBe('PAUSED');
    const illegal = await move('COMPLETED');
    expect(illegal.status).toBe(409);
    expect(illegal.body.error.code).toBe('SVC-ENV-1002');
    expect((await move('ENVELOPE_STATUS_RUNNING')).body.state).toBe('RUNNING');
    expect((await move('COMPLETED')).body.state).toBe('COMPLETED');
    const again = await cp.call('POST', `/v1/envelopes/${id}/terminate`, { key });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('SVC-ENV-1004');
    // Published by the outbox after the commit: waited for.
    await eventually(
      () => subjectsOf(cp),
      (s) => s.includes('svc.acme.envelopes.started') && s.includes('svc.acme.envelopes.completed'),
    );
  });

  it('terminates any live envelope with 200, then 409', async () => {
    const budgetId = await budget({ max_cost_usd: 10 });
    const id = (await envelope(budgetId)).body.envelope_id as string;
    const first = await cp.call('POST', `/v1/envelopes/${id}/terminate`, { key, body: { reason: 'operator stop' } });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      state: 'TERMINATED',
      termination_reason: 'manual',
      status_reason: 'operator stop',
    });
    const second = await cp.call('POST', `/v1/envelopes/${id}/terminate`, { key });
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('SVC-ENV-1003');
  });
});

describe('alert action terminate below 100 %', () => {
  it('ends the budget envelopes at the threshold, before the budget is exhausted', async () => {
    const budgetId = await budget({ max_cost_usd: 1 }, { alerts: [{ percent: 90, action: 'terminate' }] });
    const first = (await envelope(budgetId)).body.envelope_id as string;
    const second = (await envelope(budgetId)).body.envelope_id as string;
    const res = await cp.call('POST', `/v1/envelopes/${first}/events`, {
      key,
      body: { event_type: 'llm.call', timestamp: now(), cost_usd: 0.92 },
    });
    expect(res.body.state).toBe('TERMINATED');
    const other = await cp.call('GET', `/v1/envelopes/${second}`, { key });
    expect(other.body).toMatchObject({ state: 'TERMINATED', termination_reason: 'budget_exceeded' });
    expect(other.body.status_reason).toContain('90%');
    await eventually(
      () => subjectsOf(cp),
      (s) => s.includes('svc.acme.budgets.warning'),
    );
    expect(subjectsOf(cp)).not.toContain('svc.acme.budgets.exceeded');
    const budgetNow = await cp.call('GET', `/v1/budgets/${budgetId}`, { key });
    expect(budgetNow.body.status).toBe('active');
  });
});
