import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { ROOT_KEY, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { clientsFor, failure, statusDetails, unary, type CallOptions, type Clients } from '../harness/grpc.ts';

let cp: RunningControlPlane;
let clients: Clients;
let acme: string;

const ENVELOPES = 'svc.envelope.v1.EnvelopeService';
const POLICIES = 'svc.policy.v1.PolicyService';
const COSTS = 'svc.cost.v1.CostService';
const TENANTS = 'svc.tenant.v1.TenantService';

/** Calls `service.method` as the acme administrator unless told otherwise. */
function call(service: string, method: string, request: object, options: CallOptions = {}) {
  return unary(clients.client(service), method, request, { defaultKey: acme, ...options });
}

beforeAll(async () => {
  cp = await startControlPlane();
  acme = await tenantWithKey(cp, 'acme');
  clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(cp.plane.grpcPort())}`);
}, 30_000);

afterAll(async () => {
  clients.close();
  await cp.close();
});

describe('gRPC server (contracts loaded from proto/)', () => {
  it('answers the standard health service SERVING without a credential', async () => {
    const health = clients.client('grpc.health.v1.Health');
    expect(await unary(health, 'Check', { service: '' })).toEqual({ status: 'SERVING' });
    expect(await unary(health, 'Check', { service: POLICIES })).toEqual({ status: 'SERVING' });
    const unknown = await failure(unary(health, 'Check', { service: 'no.such.Service' }));
    expect(unknown.code).toBe(status.NOT_FOUND);
  });

  it('refuses a missing or wrong credential with UNAUTHENTICATED and a lacking scope with PERMISSION_DENIED', async () => {
    const missing = await failure(call(POLICIES, 'ListPolicies', {}, { key: null }));
    expect(missing.code).toBe(status.UNAUTHENTICATED);
    expect(statusDetails(missing).errorInfo?.reason).toBe('SVC-SYS-9003');
    const wrong = await failure(call(POLICIES, 'ListPolicies', {}, { key: `${acme}x` }));
    expect(wrong.code).toBe(status.UNAUTHENTICATED);
    // x-api-key is accepted as over REST.
    const viaHeader = await call(POLICIES, 'ListPolicies', {}, { key: null, metadata: { 'x-api-key': acme } });
    expect(viaHeader.policies).toEqual([]);

    const reader = await tenantWithKey(cp, 'acme', ['budgets:read']);
    const denied = await failure(call(POLICIES, 'ListPolicies', {}, { key: reader }));
    expect(denied.code).toBe(status.PERMISSION_DENIED);
    expect(statusDetails(denied).errorInfo).toMatchObject({
      reason: 'SVC-SYS-9004',
      domain: 'svc.governance',
      metadata: { required_scope: 'policies:read' },
    });
    expect((await call(COSTS, 'ListBudgets', {}, { key: reader })).budgets).toEqual([]);
  });

  it('lets x-tenant-id name another tenant for administrators only', async () => {
    await tenantWithKey(cp, 'globex');
    const made = await call(
      COSTS,
      'CreateBudget',
      { budget: { name: 'root-made', limits: { max_cost_usd: 3 } } },
      { key: ROOT_KEY, metadata: { 'x-tenant-id': 'globex' } },
    );
    expect(made.budget.tenant_id).toBe('globex');
    const refused = await failure(call(COSTS, 'ListBudgets', {}, { metadata: { 'x-tenant-id': 'globex' } }));
    expect(refused.code).toBe(status.PERMISSION_DENIED);
    const field = await failure(call(COSTS, 'ListBudgets', { tenant_id: 'globex' }));
    expect(field.code).toBe(status.PERMISSION_DENIED);
    expect(statusDetails(field).badRequest?.fieldViolations[0]?.field).toBe('tenant_id');
  });

  it('refuses an invalid field with INVALID_ARGUMENT and a BadRequest naming it, writing nothing', async () => {
    const error = await failure(call(COSTS, 'CreateBudget', { budget: { name: 'x', limits: { max_tokens: 0 } } }));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    const details = statusDetails(error);
    expect(details.errorInfo?.reason).toBe('SVC-SYS-9002');
    expect(details.badRequest?.fieldViolations.map((v) => v.field)).toEqual(['budget.limits.max_tokens']);
    expect(error.metadata.get('x-request-id')[0]).toBe(details.errorInfo?.metadata.request_id);
    expect((await call(COSTS, 'ListBudgets', {})).budgets).toEqual([]);

    const rule = await failure(
      call(POLICIES, 'CreatePolicy', {
        policy: { name: 'p', rules: [{ action: 'tool:*', actions: [] }] },
      }),
    );
    expect(statusDetails(rule).badRequest?.fieldViolations).toMatchObject([
      { field: 'policy.rules.0.actions', description: 'exactly one action is required' },
    ]);
    const missing = await failure(call(ENVELOPES, 'GetEnvelope', {}));
    expect(statusDetails(missing).badRequest?.fieldViolations).toMatchObject([
      { field: 'envelope_id', description: 'required' },
    ]);
  });

  it('bounds the lists of an evaluation as REST does, so one message cannot ask for thousands of recorded decisions', async () => {
    const { policy } = await call(POLICIES, 'CreatePolicy', {
      policy: { name: 'tools-watched', rules: [{ action: 'tool:*', actions: [{ action_type: 'ACTION_TYPE_WARN' }] }] },
    });
    const audited = async () => ((await cp.call('GET', '/v1/audit', { key: acme })).body as unknown[]).length;
    const before = await audited();
    const context = (tools: number) => ({
      tenant_id: 'acme',
      phase: 'EXECUTION_PHASE_PRE_TOOL_CALL',
      tool_names: Array.from({ length: tools }, (_, i) => `tool_${i}`),
    });
    const tooMany = await failure(
      call(POLICIES, 'EvaluatePolicy', { policy_id: policy.policy_id, context: context(101) }),
    );
    expect(tooMany.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(tooMany).badRequest?.fieldViolations).toMatchObject([
      { field: 'context.tool_names', description: 'at most 100 items' },
    ]);
    const ids = await failure(
      call(POLICIES, 'EvaluatePolicies', { policy_ids: Array(101).fill(policy.policy_id), context: context(1) }),
    );
    expect(statusDetails(ids).badRequest?.fieldViolations).toMatchObject([
      { field: 'policy_ids', description: 'at most 100 items' },
    ]);
    expect(await audited()).toBe(before);
    // The same policy named twice is evaluated once.
    const twice = await call(POLICIES, 'EvaluatePolicies', {
      policy_ids: [policy.policy_id, policy.policy_id],
      context: context(2),
      dry_run: true,
    });
    expect(twice.results).toHaveLength(1);
    await call(POLICIES, 'DeletePolicy', { policy_id: policy.policy_id });
  });

  it('answers NOT_FOUND with the SVC code of the missing resource', async () => {
    const error = await failure(call(POLICIES, 'GetPolicy', { policy_id: '00000000-0000-4000-8000-000000000000' }));
    expect(error.code).toBe(status.NOT_FOUND);
    expect(statusDetails(error).errorInfo).toMatchObject({
      reason: 'SVC-POL-2002',
      metadata: { policy_id: '00000000-0000-4000-8000-000000000000' },
    });
    expect(error.metadata.get('svc-code')).toEqual(['SVC-POL-2002']);
  });

  it('opens an envelope PENDING, moves it by the transitions of spec 3.1, and refuses an illegal one', async () => {
    const created = await call(ENVELOPES, 'CreateEnvelope', {
      adapter_type: 'custom',
      metadata: { tool_name: 'search' },
      governance: { token_budget: 1000 },
    });
    const { envelope } = created;
    expect(envelope).toMatchObject({
      tenant_id: 'acme',
      status: 'ENVELOPE_STATUS_PENDING',
      governance: { token_budget: '1000' },
      framework: { adapter_type: 'custom' },
    });
    const rest = await cp.call('GET', `/v1/envelopes/${String(envelope.envelope_id)}`, { key: acme });
    expect(rest.body).toMatchObject({ state: 'PENDING', governance_context: { token_limit: 1000 } });

    const illegal = await failure(
      call(ENVELOPES, 'UpdateEnvelopeStatus', { envelope_id: envelope.envelope_id, status: 'ENVELOPE_STATUS_RUNNING' }),
    );
    expect(illegal.code).toBe(status.FAILED_PRECONDITION);
    expect(statusDetails(illegal).errorInfo?.reason).toBe('SVC-ENV-1002');
    for (const next of ['AUTHORIZED', 'RUNNING']) {
      const moved = await call(ENVELOPES, 'UpdateEnvelopeStatus', {
        envelope_id: envelope.envelope_id,
        status: `ENVELOPE_STATUS_${next}`,
      });
      expect(moved.envelope.status).toBe(`ENVELOPE_STATUS_${next}`);
    }
    // REST terminates with its own route; gRPC then shows the precise status.
    await cp.call('POST', `/v1/envelopes/${String(envelope.envelope_id)}/terminate`, { key: acme });
    const read = await call(ENVELOPES, 'GetEnvelope', { envelope_id: envelope.envelope_id });
    expect(read.envelope.status).toBe('ENVELOPE_STATUS_TERMINATED');
    const cost = await call(COSTS, 'GetCostSummary', { envelope_id: envelope.envelope_id });
    expect(cost.cost_summary).toMatchObject({ total_input_tokens: '0', total_cost_usd: 0 });
  });

  it("names an ended envelope's status in the words of the surface that refuses it", async () => {
    const budget = await cp.call('POST', '/v1/budgets', {
      key: acme,
      body: { name: 'small', type: 'cost', limits: { max_cost_usd: 1 } },
    });
    const created = await cp.call('POST', '/v1/envelopes', {
      key: acme,
      body: { budget_id: budget.body.budget_id, adapter_type: 'custom' },
    });
    const id = String(created.body.envelope_id);
    const event = { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: 2 };
    await cp.call('POST', `/v1/envelopes/${id}/events`, { key: acme, body: event });
    expect((await call(ENVELOPES, 'GetEnvelope', { envelope_id: id })).envelope.status).toBe(
      'ENVELOPE_STATUS_BUDGET_EXCEEDED',
    );

    const rest = await cp.call('POST', `/v1/envelopes/${id}/events`, { key: acme, body: event });
    expect(rest.status).toBe(409);
    expect(rest.body.error).toMatchObject({
      code: 'SVC-ENV-1003',
      details: { envelope_id: id, state: 'TERMINATED', termination_reason: 'budget_exceeded' },
    });
    const grpc = await failure(
      call(ENVELOPES, 'UpdateEnvelopeStatus', { envelope_id: id, status: 'ENVELOPE_STATUS_COMPLETED' }),
    );
    expect(grpc.code).toBe(status.FAILED_PRECONDITION);
    expect(statusDetails(grpc).errorInfo).toMatchObject({
      reason: 'SVC-ENV-1003',
      metadata: { envelope_id: id, state: 'ENVELOPE_STATUS_BUDGET_EXCEEDED' },
    });
  });

  it('creates policies and budgets over gRPC that REST reads, and the reverse', async () => {
    const { policy } = await call(POLICIES, 'CreatePolicy', {
      policy: {
        name: 'no-shell',
        status: 'POLICY_STATUS_ACTIVE',
        enforcement: 'ENFORCEMENT_LEVEL_BLOCK',
        priority: 500,
        rules: [
          {
            action: 'tool:shell',
            conditions: [{ field: 'user_id', operator: 'CONDITION_OPERATOR_IN', values: [{ stringValue: 'mallory' }] }],
            actions: [{ action_type: 'ACTION_TYPE_DENY', message: 'no shell for mallory' }],
          },
        ],
      },
    });
    expect(policy).toMatchObject({ tenant_id: 'acme', status: 'POLICY_STATUS_ACTIVE', version: '1' });
    const rest = await cp.call('GET', `/v1/policies/${String(policy.policy_id)}`, { key: acme });
    expect(rest.body).toMatchObject({
      enabled: true,
      priority: 500,
      rules: [
        {
          action: 'tool:shell',
          effect: 'deny',
          conditions: [{ field: 'user_id', operator: 'in', value: ['mallory'] }],
        },
      ],
    });
    const draft = await call(POLICIES, 'CreatePolicy', {
      policy: { name: 'draft', rules: [{ actions: [{ action_type: 'ACTION_TYPE_WARN' }] }] },
    });
    expect(draft.policy).toMatchObject({
      status: 'POLICY_STATUS_DRAFT',
      enforcement: 'ENFORCEMENT_LEVEL_AUDIT',
      priority: 100,
    });

    const context = {
      tenant_id: 'acme',
      phase: 'EXECUTION_PHASE_PRE_TOOL_CALL',
      tool_names: ['shell'],
      user_id: 'mallory',
    };
    const evaluated = await call(POLICIES, 'EvaluatePolicy', { policy_id: policy.policy_id, context });
    expect(evaluated.result).toMatchObject({
      policy_id: policy.policy_id,
      decision: 'EVALUATION_DECISION_DENY',
      allowed: false,
      matched_rules: [{ rule_id: 'rule-1', matched_conditions: ['user_id'] }],
      actions: [{ action_type: 'ACTION_TYPE_DENY', message: 'no shell for mallory' }],
    });
    const batch = await call(POLICIES, 'EvaluatePolicies', {
      context: { ...context, user_id: 'alice' },
      dry_run: true,
    });
    expect(batch.final_decision).toBe('EVALUATION_DECISION_ALLOW');
    expect(batch.results).toHaveLength(1);
    const listed = await call(POLICIES, 'ListPolicies', { status: 'POLICY_STATUS_ACTIVE' });
    expect(listed.policies.map((p: { name: string }) => p.name)).toEqual(['no-shell']);

    const restBudget = await cp.call('POST', '/v1/budgets', {
      key: acme,
      body: { name: 'rest-made', type: 'hybrid', limits: { max_cost_usd: 5, max_tokens: 1000 } },
    });
    const { budget } = await call(COSTS, 'GetBudget', { budget_id: restBudget.body.budget_id });
    expect(budget).toMatchObject({
      name: 'rest-made',
      type: 'BUDGET_TYPE_HYBRID',
      limits: { max_cost_usd: 5, max_tokens: '1000' },
      status: 'BUDGET_STATUS_TYPE_ACTIVE',
      period: { period_type: 'BUDGET_PERIOD_TYPE_MONTHLY' },
    });
    const made = await call(COSTS, 'CreateBudget', {
      budget: {
        name: 'grpc-made',
        limits: { max_tokens: 500 },
        thresholds: [{ threshold_percent: 50, action: 'THRESHOLD_ACTION_WARN' }],
        period: { period_type: 'BUDGET_PERIOD_TYPE_DAILY' },
      },
    });
    const readBack = await cp.call('GET', `/v1/budgets/${String(made.budget.budget_id)}`, { key: acme });
    expect(readBack.body).toMatchObject({
      name: 'grpc-made',
      type: 'token',
      period: 'daily',
      limits: { max_tokens: 500, max_cost_usd: null },
      alerts: [{ percent: 50, action: 'warn' }],
    });
    const budgetStatus = await call(COSTS, 'GetBudgetStatus', { budget_id: made.budget.budget_id });
    expect(budgetStatus.status).toMatchObject({
      status: 'BUDGET_STATUS_TYPE_ACTIVE',
      token_usage_percent: 0,
      remaining: { max_tokens: '500' },
      next_threshold: { threshold_percent: 50 },
    });
  });

  it('refuses a message over the 4 MiB default with RESOURCE_EXHAUSTED and reads one under it', async () => {
    const over = await failure(call(POLICIES, 'GetPolicy', { policy_id: 'p'.repeat(4 * 1_048_576 + 16) }));
    expect(over.code).toBe(status.RESOURCE_EXHAUSTED);
    // Under the limit the message is read and answered on its merits (an id that long is no policy's).
    const under = await failure(call(POLICIES, 'GetPolicy', { policy_id: 'p'.repeat(3 * 1_048_576) }));
    expect(under.code).not.toBe(status.RESOURCE_EXHAUSTED);
  });

  it('pages lists with page_size and an opaque page_token', async () => {
    for (let i = 0; i < 3; i++)
      await call(COSTS, 'CreateBudget', { budget: { name: `paged-${i}`, limits: { max_cost_usd: 1 } } });
    const all = (await call(COSTS, 'ListBudgets', {})).budgets.length;
    const first = await call(COSTS, 'ListBudgets', { page_size: 2 });
    expect(first.budgets).toHaveLength(2);
    expect(first.next_page_token).not.toBe('');
    const rest = await call(COSTS, 'ListBudgets', { page_size: 100, page_token: first.next_page_token });
    expect(first.budgets.length + rest.budgets.length).toBe(all);
    expect(rest.next_page_token).toBe('');
    const bad = await failure(call(COSTS, 'ListBudgets', { page_token: 'bm90IG91cnM' }));
    expect(statusDetails(bad).badRequest?.fieldViolations[0]?.field).toBe('page_token');
    const foreign = (await call(POLICIES, 'ListPolicies', { page_size: 1 })).next_page_token;
    const ofPolicies = await failure(call(COSTS, 'ListBudgets', { page_token: foreign }));
    expect(statusDetails(ofPolicies).badRequest?.fieldViolations[0]?.field).toBe('page_token');
  });

  it('pages as REST does: a token of either surface continues the same list on the other', async () => {
    const ids = (budgets: Array<{ budget_id: string }>) => budgets.map((b) => b.budget_id);
    const restFirst = await cp.call('GET', '/v1/budgets?page_size=2', { key: acme });
    const restToken = restFirst.headers.get('x-next-page-token')!;
    const restNext = await cp.call('GET', `/v1/budgets?page_size=2&page_token=${restToken}`, { key: acme });
    const grpcNext = await call(COSTS, 'ListBudgets', { page_size: 2, page_token: restToken });
    expect(ids(grpcNext.budgets)).toEqual(ids(restNext.body));
    const grpcFirst = await call(COSTS, 'ListBudgets', { page_size: 2 });
    const fromGrpc = await cp.call('GET', `/v1/budgets?page_size=2&page_token=${grpcFirst.next_page_token}`, {
      key: acme,
    });
    expect(ids(fromGrpc.body)).toEqual(ids(restNext.body));
  });

  it('filters ListPolicies by rule_type: a named type selects none, since rules hold no type', async () => {
    await call(POLICIES, 'CreatePolicy', {
      policy: { name: 'untyped', rules: [{ action: 'tool:ls', actions: [{ action_type: 'ACTION_TYPE_ALLOW' }] }] },
    });
    expect((await call(POLICIES, 'ListPolicies', {})).policies.length).toBeGreaterThan(0);
    const typed = await call(POLICIES, 'ListPolicies', { rule_type: 'RULE_TYPE_TOOL_ALLOWLIST' });
    expect(typed.policies).toEqual([]);
  });

  it('answers 20 items per page unless asked, and at most 100 (spec 8)', async () => {
    const have = (await call(COSTS, 'ListBudgets', { page_size: 100 })).budgets.length;
    for (let i = have; i < 101; i++)
      await call(COSTS, 'CreateBudget', { budget: { name: `many-${i}`, limits: { max_cost_usd: 1 } } });
    const first = await call(COSTS, 'ListBudgets', {});
    expect(first.budgets).toHaveLength(20);
    expect(first.next_page_token).not.toBe('');
    const clamped = await call(COSTS, 'ListBudgets', { page_size: 1000 });
    expect(clamped.budgets).toHaveLength(100);
    expect(clamped.next_page_token).not.toBe('');
    const negative = await failure(call(COSTS, 'ListBudgets', { page_size: -1 }));
    expect(statusDetails(negative).badRequest?.fieldViolations[0]?.field).toBe('page_size');
  });

  it('lists budgets by the WARNING status past an alert threshold', async () => {
    const { budget } = await call(COSTS, 'CreateBudget', {
      budget: { name: 'warned', limits: { max_cost_usd: 10 }, thresholds: [{ threshold_percent: 50 }] },
    });
    const env = await cp.call('POST', '/v1/envelopes', {
      key: acme,
      body: { budget_id: budget.budget_id, adapter_type: 'custom' },
    });
    await cp.call('POST', `/v1/envelopes/${String(env.body.envelope_id)}/events`, {
      key: acme,
      body: { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: 6 },
    });
    const ids = async (status: string) =>
      ((await call(COSTS, 'ListBudgets', { status, page_size: 100 })).budgets as Array<{ budget_id: string }>).map(
        (b) => b.budget_id,
      );
    expect(await ids('BUDGET_STATUS_TYPE_WARNING')).toContain(budget.budget_id);
    expect(await ids('BUDGET_STATUS_TYPE_ACTIVE')).not.toContain(budget.budget_id);
    const status = await call(COSTS, 'GetBudgetStatus', { budget_id: budget.budget_id });
    expect(status.status.status).toBe('BUDGET_STATUS_TYPE_WARNING');
  });

  it('issues API keys whose secret is shown once and whose revocation holds on every surface', async () => {
    const created = await call(TENANTS, 'CreateApiKey', { name: 'grpc-key', scopes: ['budgets:read'] });
    const secret = created.key_secret as string;
    expect(created.api_key).toMatchObject({
      name: 'grpc-key',
      status: 'API_KEY_STATUS_ACTIVE',
      scopes: ['budgets:read'],
    });
    expect(secret.endsWith(String(created.api_key.key_hint).slice(-4))).toBe(true);
    const listed = await call(TENANTS, 'ListApiKeys', {});
    expect(JSON.stringify(listed)).not.toContain(secret);
    expect((await cp.call('GET', '/v1/budgets', { key: secret })).status).toBe(200);
    expect((await call(COSTS, 'ListBudgets', {}, { key: secret })).budgets.length).toBeGreaterThan(0);

    const revoked = await cp.call('DELETE', `/v1/api-keys/${String(created.api_key.id)}`, { key: acme });
    expect(revoked.body.status).toBe('revoked');
    const refused = await failure(call(COSTS, 'ListBudgets', {}, { key: secret }));
    expect(refused.code).toBe(status.UNAUTHENTICATED);

    const restKey = await cp.call('POST', '/v1/api-keys', { key: acme, body: { name: 'rest-key', scopes: ['admin'] } });
    const gone = await call(TENANTS, 'RevokeApiKey', { key_id: restKey.body.id });
    expect(gone.api_key.status).toBe('API_KEY_STATUS_REVOKED');
    expect((await cp.call('GET', '/v1/budgets', { key: restKey.body.key_secret })).status).toBe(401);
  });

  it("creates a key only within the creator's expiry, scopes and tenant, writing nothing otherwise", async () => {
    const expiring = await cp.call('POST', '/v1/api-keys', {
      key: acme,
      body: { name: 'grpc-week', scopes: ['admin'], expires_in_seconds: 600 },
    });
    const week = { key: String(expiring.body.key_secret) };
    await tenantWithKey(cp, 'globex');
    const reader = { key: await tenantWithKey(cp, 'acme', ['budgets:read']) };
    const count = async () => (await call(TENANTS, 'ListApiKeys', { page_size: 100 })).api_keys.length as number;
    const before = await count();
    for (const expires_in_seconds of [0, 3600]) {
      const refused = await failure(
        call(TENANTS, 'CreateApiKey', { name: 'outlives', scopes: ['budgets:read'], expires_in_seconds }, week),
      );
      expect(refused.code).toBe(status.INVALID_ARGUMENT);
      expect(statusDetails(refused).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['expires_in_seconds']);
    }
    const unscoped = await failure(call(TENANTS, 'CreateApiKey', { name: 'escalate', scopes: ['admin'] }, reader));
    expect(unscoped.code).toBe(status.PERMISSION_DENIED);
    const elsewhere = await failure(
      call(TENANTS, 'CreateApiKey', { name: 'theirs', scopes: ['admin'] }, { metadata: { 'x-tenant-id': 'globex' } }),
    );
    expect(elsewhere.code).toBe(status.PERMISSION_DENIED);
    expect(await count()).toBe(before);
    const bounded = await call(
      TENANTS,
      'CreateApiKey',
      { name: 'bounded', scopes: ['budgets:read'], expires_in_seconds: 60 },
      week,
    );
    expect(bounded.api_key.status).toBe('API_KEY_STATUS_ACTIVE');
    expect(await count()).toBe(before + 1);
  });

  it('ends a call whose deadline has passed with DEADLINE_EXCEEDED', async () => {
    const error = await failure(call(POLICIES, 'ListPolicies', {}, { deadlineMs: -1 }));
    expect(error.code).toBe(status.DEADLINE_EXCEEDED);
  });
});

describe('policy updates and approvals over gRPC and the gateway', () => {
  const rules = [{ action: 'tool:shell', actions: [{ action_type: 'ACTION_TYPE_DENY' }] }];

  it('updates the masked fields only, replaces every field with an empty mask, and deletes', async () => {
    const { policy } = await call(POLICIES, 'CreatePolicy', {
      policy: {
        name: 'lifecycle',
        priority: 200,
        status: 'POLICY_STATUS_ACTIVE',
        rules: [
          {
            action: 'tool:sql',
            conditions: [{ field: 'user_id', operator: 'CONDITION_OPERATOR_EQUALS', values: [{ stringValue: 'bob' }] }],
            actions: [{ action_type: 'ACTION_TYPE_DENY' }],
          },
        ],
      },
    });
    const masked = await call(POLICIES, 'UpdatePolicy', {
      policy: { policy_id: policy.policy_id, priority: 900, name: 'ignored' },
      update_mask: { paths: ['priority'] },
    });
    expect(masked.policy).toMatchObject({
      name: 'lifecycle',
      priority: 900,
      version: '2',
      status: 'POLICY_STATUS_ACTIVE',
    });
    expect(masked.policy.rules[0].conditions[0].values).toEqual([{ stringValue: 'bob', kind: 'stringValue' }]);
    const badMask = await failure(
      call(POLICIES, 'UpdatePolicy', { policy: { policy_id: policy.policy_id }, update_mask: { paths: ['version'] } }),
    );
    expect(statusDetails(badMask).badRequest?.fieldViolations[0]?.field).toBe('update_mask');
    const replaced = await call(POLICIES, 'UpdatePolicy', {
      policy: { policy_id: policy.policy_id, name: 'replaced', rules },
    });
    expect(replaced.policy).toMatchObject({
      name: 'replaced',
      priority: 100,
      status: 'POLICY_STATUS_DRAFT',
      version: '3',
    });

    // The gateway: PATCH with update_mask in the query, the policy as the body; then DELETE.
    const patched = await cp.call('PATCH', `/v1/policies/${String(policy.policy_id)}?update_mask=priority,status`, {
      key: acme,
      body: { priority: 42, status: 'POLICY_STATUS_ACTIVE' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.policy).toMatchObject({ name: 'replaced', priority: 42, status: 'POLICY_STATUS_ACTIVE' });
    expect((await cp.call('GET', `/v1/policies/${String(policy.policy_id)}`, { key: acme })).body).toMatchObject({
      priority: 42,
      enabled: true,
    });
    expect((await cp.call('DELETE', `/v1/policies/${String(policy.policy_id)}`, { key: acme })).body).toEqual({});
    const gone = await failure(call(POLICIES, 'GetPolicy', { policy_id: policy.policy_id }));
    expect(gone.code).toBe(status.NOT_FOUND);
    expect((await failure(call(POLICIES, 'DeletePolicy', { policy_id: policy.policy_id }))).code).toBe(
      status.NOT_FOUND,
    );
  });

  it('lists the approval a REQUIRE_APPROVAL decision opened and decides it once', async () => {
    await call(POLICIES, 'CreatePolicy', {
      policy: {
        name: 'review-deploys',
        status: 'POLICY_STATUS_ACTIVE',
        enforcement: 'ENFORCEMENT_LEVEL_BLOCK',
        priority: 999,
        rules: [{ action: 'tool:deploy', actions: [{ action_type: 'ACTION_TYPE_REQUIRE_APPROVAL' }] }],
      },
    });
    const evaluated = await call(POLICIES, 'EvaluatePolicies', {
      context: { tenant_id: 'acme', phase: 'EXECUTION_PHASE_PRE_TOOL_CALL', tool_names: ['deploy'] },
    });
    expect(evaluated.final_decision).toBe('EVALUATION_DECISION_REQUIRE_APPROVAL');
    const pending = await call(POLICIES, 'ListApprovals', { tenant_id: 'acme', status: 'APPROVAL_STATUS_PENDING' });
    const approval = pending.approvals.find((a: { action: string }) => a.action === 'tool:deploy');
    expect(approval).toMatchObject({ status: 'APPROVAL_STATUS_PENDING', tenant_id: 'acme' });
    // The key that asked may not decide: a second credential of the tenant reviews.
    const selfApproved = await failure(
      call(POLICIES, 'UpdateApproval', {
        approval_id: approval.approval_id,
        status: 'APPROVAL_STATUS_APPROVED',
        reviewer_id: 'ciso@acme.example',
      }),
    );
    expect(selfApproved.code).toBe(status.PERMISSION_DENIED);
    expect(statusDetails(selfApproved).errorInfo?.reason).toBe('SVC-SYS-9004');
    expect(selfApproved.details).toContain('requested by this credential');
    const reviewer = await cp.call('POST', '/v1/api-keys', {
      key: acme,
      body: { name: 'grpc-reviewer', scopes: ['policies:read', 'policies:write'] },
    });
    const asReviewer = { key: String(reviewer.body.key_secret) };
    // reviewer_id is accepted as spec 4.6 has it, but the reviewer recorded is the caller.
    const decided = await call(
      POLICIES,
      'UpdateApproval',
      {
        approval_id: approval.approval_id,
        status: 'APPROVAL_STATUS_APPROVED',
        reviewer_id: 'alice',
        review_note: 'ok',
      },
      asReviewer,
    );
    expect(decided.approval).toMatchObject({ status: 'APPROVAL_STATUS_APPROVED', reviewer_id: reviewer.body.id });
    const audit = await cp.call('GET', `/v1/audit?resource_type=approval`, { key: acme });
    const record = audit.body.find((r: { resource: { id: string } }) => r.resource.id === approval.approval_id);
    expect(record).toMatchObject({ actor: { id: reviewer.body.id }, metadata: { reviewer_id: reviewer.body.id } });
    const again = await failure(
      call(
        POLICIES,
        'UpdateApproval',
        { approval_id: approval.approval_id, status: 'APPROVAL_STATUS_REJECTED', reviewer_id: 'bob' },
        asReviewer,
      ),
    );
    expect(again.code).toBe(status.FAILED_PRECONDITION);
    expect(statusDetails(again).errorInfo?.reason).toBe('SVC-POL-2006');
    const rest = await cp.call('PATCH', `/v1/approvals/${String(approval.approval_id)}`, {
      key: acme,
      body: { status: 'REJECTED', reviewer_id: 'bob' },
    });
    expect(rest.status).toBe(409);
  });
});

describe('evaluation by a credential without envelopes:write', () => {
  it('decides REQUIRE_APPROVAL without opening an approval or recording the evaluation', async () => {
    const { policy } = await call(POLICIES, 'CreatePolicy', {
      policy: {
        name: 'review-releases',
        status: 'POLICY_STATUS_ACTIVE',
        enforcement: 'ENFORCEMENT_LEVEL_BLOCK',
        priority: 998,
        rules: [{ action: 'tool:release', actions: [{ action_type: 'ACTION_TYPE_REQUIRE_APPROVAL' }] }],
      },
    });
    const reader = { key: await tenantWithKey(cp, 'acme', ['policies:read']) };
    const context = { tenant_id: 'acme', phase: 'EXECUTION_PHASE_PRE_TOOL_CALL', tool_names: ['release'] };
    const pending = async () =>
      (await call(POLICIES, 'ListApprovals', { tenant_id: 'acme', status: 'APPROVAL_STATUS_PENDING', page_size: 100 }))
        .approvals.length as number;
    const before = await pending();
    const one = await call(POLICIES, 'EvaluatePolicy', { policy_id: policy.policy_id, context }, reader);
    expect(one.result).toMatchObject({ decision: 'EVALUATION_DECISION_REQUIRE_APPROVAL', approval_id: '' });
    const all = await call(POLICIES, 'EvaluatePolicies', { context }, reader);
    expect(all.final_decision).toBe('EVALUATION_DECISION_REQUIRE_APPROVAL');
    expect(await pending()).toBe(before);
    expect((await call(POLICIES, 'GetEvaluationHistory', { policy_id: policy.policy_id })).evaluations).toEqual([]);

    const recorded = await call(POLICIES, 'EvaluatePolicy', { policy_id: policy.policy_id, context });
    expect(recorded.result.approval_id).not.toBe('');
    expect(await pending()).toBe(before + 1);
    expect((await call(POLICIES, 'GetEvaluationHistory', { policy_id: policy.policy_id })).evaluations).toHaveLength(1);
  });
});

describe('evaluation history', () => {
  it('lists the evaluations a policy decided, newest first, by decision and time, over gRPC and GET /v1/policies/{id}/evaluations', async () => {
    const { policy } = await call(POLICIES, 'CreatePolicy', {
      policy: {
        name: 'history',
        status: 'POLICY_STATUS_ACTIVE',
        enforcement: 'ENFORCEMENT_LEVEL_BLOCK',
        priority: 990,
        rules: [
          { action: 'tool:rm', actions: [{ action_type: 'ACTION_TYPE_DENY' }] },
          { action: 'tool:ls', actions: [{ action_type: 'ACTION_TYPE_ALLOW' }] },
        ],
      },
    });
    const before = new Date(Date.now() - 1000).toISOString();
    for (const tool of ['rm', 'ls', 'rm'])
      await call(POLICIES, 'EvaluatePolicy', {
        policy_id: policy.policy_id,
        context: { tenant_id: 'acme', phase: 'EXECUTION_PHASE_PRE_TOOL_CALL', tool_names: [tool] },
      });
    // A dry run records nothing.
    await call(POLICIES, 'EvaluatePolicy', {
      policy_id: policy.policy_id,
      context: { tenant_id: 'acme', action: 'tool:rm' },
      dry_run: true,
    });
    const all = await call(POLICIES, 'GetEvaluationHistory', { policy_id: policy.policy_id });
    expect(all.evaluations.map((e: { action: string }) => e.action)).toEqual(['tool:rm', 'tool:ls', 'tool:rm']);
    expect(all.evaluations[0]).toMatchObject({
      policy_id: policy.policy_id,
      decision: 'EVALUATION_DECISION_DENY',
      rule_id: 'rule-1',
      shadow: false,
      actor_type: 'api_key',
    });
    const denies = await call(POLICIES, 'GetEvaluationHistory', {
      policy_id: policy.policy_id,
      decision: 'EVALUATION_DECISION_DENY',
      page_size: 1,
    });
    expect(denies.evaluations).toHaveLength(1);
    expect(denies.next_page_token).not.toBe('');
    const http = await cp.call(
      'GET',
      `/v1/policies/${String(policy.policy_id)}/evaluations?decision=EVALUATION_DECISION_ALLOW&start_time=${before}`,
      { key: acme },
    );
    expect(http.status).toBe(200);
    expect(http.body.evaluations).toHaveLength(1);
    expect(http.body.evaluations[0]).toMatchObject({ action: 'tool:ls', decision: 'EVALUATION_DECISION_ALLOW' });
    expect(typeof http.body.evaluations[0].evaluated_at).toBe('string');
    const future = await call(POLICIES, 'GetEvaluationHistory', {
      policy_id: policy.policy_id,
      start_time: { seconds: Math.floor(Date.now() / 1000) + 3600, nanos: 0 },
    });
    expect(future.evaluations).toEqual([]);
  });
});

describe('spend summary', () => {
  it('sums the usage events of the window in total and by model, workflow and day', async () => {
    await tenantWithKey(cp, 'spender');
    const as = { key: ROOT_KEY, metadata: { 'x-tenant-id': 'spender' } };
    const rest = (method: string, path: string, body: unknown) =>
      cp.call(method, path, { headers: { 'x-tenant-id': 'spender' }, body });
    const budget = await rest('POST', '/v1/budgets', {
      name: 'wf',
      type: 'cost',
      limits: { max_cost_usd: 100 },
      workflow_id: 'etl',
    });
    const envelope = await rest('POST', '/v1/envelopes', { adapter_type: 'custom', budget_id: budget.body.budget_id });
    const other = await rest('POST', '/v1/envelopes', { adapter_type: 'custom' });
    const record = (envelopeId: string, event: Record<string, unknown>) =>
      rest('POST', `/v1/envelopes/${envelopeId}/events`, { timestamp: new Date().toISOString(), ...event });
    expect(
      (
        await record(envelope.body.envelope_id, {
          event_type: 'llm.call',
          model: 'gpt-4o',
          tokens: { input: 100, output: 10 },
          cost_usd: 0.5,
        })
      ).status,
    ).toBe(202);
    await record(envelope.body.envelope_id, { event_type: 'tool.call', cost_usd: 0.25 });
    await record(other.body.envelope_id, {
      event_type: 'llm.call',
      model: 'claude',
      tokens: { input: 5, output: 5 },
      cost_usd: 1,
    });

    const byModel = await call(
      COSTS,
      'GetSpendSummary',
      { tenant_id: 'spender', group_by: 'SPEND_GROUP_BY_MODEL' },
      as,
    );
    expect(byModel.spend_summary.total).toMatchObject({
      total_tokens: '120',
      total_cost_usd: 1.75,
      total_llm_calls: '2',
      total_tool_calls: '1',
      total_executions: '2',
    });
    expect(byModel.spend_summary.groups.map((g: { key: string }) => g.key)).toEqual(['', 'claude', 'gpt-4o']);
    const etl = await call(
      COSTS,
      'GetSpendSummary',
      { tenant_id: 'spender', workflow_id: 'etl', group_by: 'SPEND_GROUP_BY_WORKFLOW' },
      as,
    );
    expect(etl.spend_summary.total).toMatchObject({ total_cost_usd: 0.75, total_executions: '1' });
    expect(etl.spend_summary.groups).toMatchObject([{ key: 'etl' }]);
    const byDay = await call(COSTS, 'GetSpendSummary', { tenant_id: 'spender', group_by: 'SPEND_GROUP_BY_WEEK' }, as);
    const monday = new Date();
    monday.setUTCDate(monday.getUTCDate() - ((monday.getUTCDay() + 6) % 7));
    expect(byDay.spend_summary.groups).toMatchObject([{ key: monday.toISOString().slice(0, 10) }]);
    const past = await call(
      COSTS,
      'GetSpendSummary',
      { tenant_id: 'spender', start_time: { seconds: 1, nanos: 0 }, end_time: { seconds: 2, nanos: 0 } },
      as,
    );
    expect(past.spend_summary.total).toMatchObject({ total_tokens: '0', total_cost_usd: 0 });
    const inverted = await failure(
      call(
        COSTS,
        'GetSpendSummary',
        { tenant_id: 'spender', start_time: { seconds: 3, nanos: 0 }, end_time: { seconds: 2, nanos: 0 } },
        as,
      ),
    );
    expect(statusDetails(inverted).badRequest?.fieldViolations[0]?.field).toBe('start_time');
    // 253402300800 s is 10000-01-01: past the years a timestamp is kept in.
    const tooLate = await failure(
      call(COSTS, 'GetSpendSummary', { tenant_id: 'spender', end_time: { seconds: 253_402_300_800, nanos: 0 } }, as),
    );
    expect(tooLate.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(tooLate).badRequest?.fieldViolations[0]).toMatchObject({
      field: 'end_time',
      description: expect.stringContaining('0000 to 9999'),
    });

    // The recorded call of the model asked about (output 10 tokens; the other model's 5 do not count) informs it.
    const predicted = await call(
      COSTS,
      'PredictCost',
      { tenant_id: 'spender', model_ids: ['gpt-4o'], estimated_input_tokens: 1000, use_historical_data: true },
      as,
    );
    expect(predicted).toMatchObject({
      historical_based: true,
      sample_size: 1,
      prediction: { estimated_input_tokens: '1000', estimated_output_tokens: '10', estimated_total_tokens: '1010' },
    });
    const p = predicted.prediction as {
      estimated_cost_usd: number;
      estimated_cost_usd_min: number;
      estimated_cost_usd_max: number;
    };
    expect(p.estimated_cost_usd).toBeGreaterThan(0);
    expect(p.estimated_cost_usd_min).toBeLessThanOrEqual(p.estimated_cost_usd);
    expect(p.estimated_cost_usd_max).toBeGreaterThanOrEqual(p.estimated_cost_usd);
    const fresh = await call(
      COSTS,
      'PredictCost',
      { tenant_id: 'spender', model_ids: ['gpt-4o', 'gpt-4o-mini'], input_text: 'Summarise this report in one line.' },
      as,
    );
    expect(fresh).toMatchObject({ historical_based: false, sample_size: 0, prediction: { confidence_level: 'low' } });
    expect(Number(fresh.prediction.estimated_input_tokens)).toBeGreaterThan(3);
    const noModel = await failure(call(COSTS, 'PredictCost', { tenant_id: 'spender', input_text: 'x' }, as));
    expect(statusDetails(noModel).badRequest?.fieldViolations[0]?.field).toBe('model_ids');
    const http = await cp.call('POST', '/v1/costs/predict', {
      headers: { 'x-tenant-id': 'spender' },
      body: { model_ids: ['gpt-4o'], estimated_input_tokens: 2000, use_historical_data: false },
    });
    expect(http.status).toBe(200);
    expect(http.body).toMatchObject({ prediction: { estimated_input_tokens: 2000 }, sample_size: 0 });
  });
});

describe('budget updates', () => {
  it('changes the masked fields of a budget, keeps its usage, and refuses a new period', async () => {
    const { budget } = await call(COSTS, 'CreateBudget', {
      budget: {
        name: 'to-change',
        limits: { max_cost_usd: 10, max_tokens: 1000 },
        thresholds: [{ threshold_percent: 90 }],
        period: { period_type: 'BUDGET_PERIOD_TYPE_DAILY' },
      },
    });
    const envelope = await cp.call('POST', '/v1/envelopes', {
      key: acme,
      body: { adapter_type: 'custom', budget_id: budget.budget_id },
    });
    await cp.call('POST', `/v1/envelopes/${String(envelope.body.envelope_id)}/events`, {
      key: acme,
      body: {
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        tokens: { input: 50, output: 50 },
        cost_usd: 1,
      },
    });
    const raised = await call(COSTS, 'UpdateBudget', {
      budget: { budget_id: budget.budget_id, limits: { max_cost_usd: 20 }, name: 'ignored' },
      update_mask: { paths: ['limits.max_cost_usd'] },
    });
    expect(raised.budget).toMatchObject({
      name: 'to-change',
      limits: { max_cost_usd: 20, max_tokens: '1000' },
      current_spend: { total_tokens: '100', total_cost_usd: 1 },
      period: { period_type: 'BUDGET_PERIOD_TYPE_DAILY' },
    });
    const rest = await cp.call('GET', `/v1/budgets/${String(budget.budget_id)}`, { key: acme });
    expect(rest.body).toMatchObject({ limits: { max_cost_usd: 20, max_tokens: 1000 }, usage: { tokens_used: 100 } });

    const patched = await cp.call('PATCH', `/v1/budgets/${String(budget.budget_id)}?update_mask=name,thresholds`, {
      key: acme,
      body: { name: 'renamed', thresholds: [{ threshold_percent: 50, action: 'THRESHOLD_ACTION_WARN' }] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.budget).toMatchObject({
      name: 'renamed',
      thresholds: [{ threshold_percent: 50, action: 'THRESHOLD_ACTION_WARN' }],
      status: 'BUDGET_STATUS_TYPE_ACTIVE',
    });
    const period = await failure(
      call(COSTS, 'UpdateBudget', {
        budget: {
          budget_id: budget.budget_id,
          limits: { max_tokens: 5 },
          period: { period_type: 'BUDGET_PERIOD_TYPE_MONTHLY' },
        },
      }),
    );
    expect(statusDetails(period).badRequest?.fieldViolations[0]?.field).toBe('period');
    const mask = await failure(
      call(COSTS, 'UpdateBudget', {
        budget: { budget_id: budget.budget_id },
        update_mask: { paths: ['current_spend'] },
      }),
    );
    expect(statusDetails(mask).badRequest?.fieldViolations[0]?.field).toBe('update_mask');
    const invalid = await failure(
      call(COSTS, 'UpdateBudget', {
        budget: { budget_id: budget.budget_id, limits: { max_tokens: -1 } },
        update_mask: { paths: ['limits.max_tokens'] },
      }),
    );
    expect(statusDetails(invalid).badRequest?.fieldViolations[0]?.field).toBe('budget.limits.max_tokens');
    const missing = await failure(
      call(COSTS, 'UpdateBudget', { budget: { budget_id: '00000000-0000-4000-8000-000000000000', limits: {} } }),
    );
    expect(missing.code).toBe(status.NOT_FOUND);
  });

  it('keeps both of two concurrent updates of different fields', async () => {
    for (let trial = 0; trial < 5; trial++) {
      const { budget } = await call(COSTS, 'CreateBudget', {
        budget: { name: `racing-${trial}`, limits: { max_cost_usd: 100, max_tokens: 1000 } },
      });
      const id = String(budget.budget_id);
      // Security lowers the limit while a tagging job renames the budget.
      const [lowered, renamed] = await Promise.all([
        cp.call('PATCH', `/v1/budgets/${id}?update_mask=limits.max_cost_usd`, {
          key: acme,
          body: { limits: { max_cost_usd: 1 } },
        }),
        call(COSTS, 'UpdateBudget', {
          budget: { budget_id: id, name: `renamed-${trial}` },
          update_mask: { paths: ['name'] },
        }),
      ]);
      expect(lowered.status).toBe(200);
      expect(renamed.budget).toMatchObject({ name: `renamed-${trial}` });
      const after = await cp.call('GET', `/v1/budgets/${id}`, { key: acme });
      expect(after.body, `trial ${trial}`).toMatchObject({ name: `renamed-${trial}`, limits: { max_cost_usd: 1 } });
    }
  });
});
