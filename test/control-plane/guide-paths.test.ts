import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

/** The guides' paths of spec 4.4 (`/api/v1/...`, `/version`) over the same services as `/v1`. */

let cp: RunningControlPlane;
let key: string;
let otherKey: string;
let readerKey: string;
let envelopeReaderKey: string;

beforeAll(async () => {
  cp = await startControlPlane({ rate_limit_per_minute: 600 });
  key = await tenantWithKey(cp, 'guide-a');
  otherKey = await tenantWithKey(cp, 'guide-b');
  readerKey = await tenantWithKey(cp, 'guide-a', ['policies:read']);
  envelopeReaderKey = await tenantWithKey(cp, 'guide-a', ['envelopes:read']);
}, 60_000);
afterAll(async () => cp.close());

const shellRule = (extra: Record<string, unknown> = {}) => ({
  'no-rm': {
    action: 'tool:shell',
    effect: 'deny',
    conditions: [{ field: 'input_text', operator: 'CONTAINS', value: 'rm -rf' }],
    message: 'no recursive deletes',
    ...extra,
  },
});

async function created(body: Record<string, unknown>, as = key): Promise<Record<string, any>> {
  const res = await cp.call('POST', '/api/v1/policies', { key: as, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as Record<string, any>;
}

async function policyCount(as = key): Promise<number> {
  const res = await cp.call('GET', '/api/v1/policies?page_size=100', { key: as });
  expect(res.status).toBe(200);
  return (res.body.policies as unknown[]).length;
}

describe('authentication and scopes', () => {
  const routes: Array<[string, string, unknown?]> = [
    ['GET', '/api/v1/policies'],
    ['POST', '/api/v1/policies', { name: 'x', rules: shellRule() }],
    ['GET', '/api/v1/policies/00000000-0000-4000-8000-000000000001'],
    ['PATCH', '/api/v1/policies/00000000-0000-4000-8000-000000000001', { enabled: false }],
    ['DELETE', '/api/v1/policies/00000000-0000-4000-8000-000000000001'],
    ['POST', '/api/v1/policies/import', [{ name: 'x', rules: shellRule() }]],
    ['POST', '/api/v1/evaluate', { action: 'tool:shell' }],
    ['GET', '/api/v1/traces'],
    ['GET', '/api/v1/traces/00000000-0000-4000-8000-000000000001'],
    ['GET', '/api/v1/traces/00000000-0000-4000-8000-000000000001/evaluations'],
    ['GET', '/api/v1/config'],
    ['GET', '/api/v1/features'],
    ['GET', '/api/v1/features/nats'],
    ['PATCH', '/api/v1/features/oracle_overrun_watch', { enabled: false }],
  ];

  it.each(routes)('refuses %s %s without a credential (401) and with a bad one', async (method, path, body) => {
    expectSvcError(await cp.call(method, path, { key: null, body }), 401, 'SVC-SYS-9003');
    expectSvcError(await cp.call(method, path, { key: 'svc_nope_nope', body }), 401, 'SVC-SYS-9003');
  });

  it('asks the scopes of the matching /v1 routes', async () => {
    const before = await policyCount();
    // policies:read reads and evaluates, and writes nothing.
    expect((await cp.call('GET', '/api/v1/policies', { key: readerKey })).status).toBe(200);
    expect((await cp.call('POST', '/api/v1/evaluate', { key: readerKey, body: { action: 'tool:x' } })).status).toBe(
      200,
    );
    for (const [method, path, body] of [
      ['POST', '/api/v1/policies', { name: 'x', rules: shellRule() }],
      ['POST', '/api/v1/policies/import', [{ name: 'x', rules: shellRule() }]],
      ['PATCH', '/api/v1/policies/00000000-0000-4000-8000-000000000001', { enabled: false }],
      ['DELETE', '/api/v1/policies/00000000-0000-4000-8000-000000000001'],
      ['GET', '/api/v1/traces'],
    ] as const) {
      const error = expectSvcError(await cp.call(method, path, { key: readerKey, body }), 403, 'SVC-SYS-9004');
      expect(String(error.message)).toMatch(/policies:write|envelopes:read/);
    }
    // envelopes:read reads traces, not policies nor a trace's evaluations.
    expect((await cp.call('GET', '/api/v1/traces', { key: envelopeReaderKey })).status).toBe(200);
    expectSvcError(await cp.call('GET', '/api/v1/policies', { key: envelopeReaderKey }), 403, 'SVC-SYS-9004');
    expect(await policyCount()).toBe(before);
  });

  it('serves /version to anyone, with the storage schema version', async () => {
    const res = await cp.call('GET', '/version', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ service: 'control-plane', api_version: 'v1' });
    expect(res.body.schema_version).toBeGreaterThanOrEqual(1);
  });
});

describe('/api/v1/policies', () => {
  it('creates a policy from the guide fields and reads it back', async () => {
    const policy = await created({
      name: 'shell-guard',
      policy_type: 'tool_restriction',
      rules: shellRule(),
      enabled: true,
      priority: 700,
    });
    expect(policy).toMatchObject({
      tenant_id: 'guide-a',
      name: 'shell-guard',
      policy_type: 'tool_restriction',
      enabled: true,
      priority: 700,
      status: 'ACTIVE',
      enforcement: 'BLOCK',
      version: 1,
      rules: {
        'no-rm': {
          action: 'tool:shell',
          decision: 'DENY',
          conditions: [{ field: 'input_text', operator: 'contains', value: 'rm -rf' }],
          message: 'no recursive deletes',
        },
      },
    });
    const read = await cp.call('GET', `/api/v1/policies/${String(policy.policy_id)}`, { key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(policy);
  });

  it('defaults a policy to enabled, priority 100 and type custom; enabled false stores it DISABLED', async () => {
    const plain = await created({ name: 'plain', rules: { r: { action: 'tool:x', effect: 'allow' } } });
    expect(plain).toMatchObject({ enabled: true, status: 'ACTIVE', priority: 100, policy_type: 'custom' });
    const off = await created({ name: 'off', enabled: false, rules: { r: { action: 'tool:y', effect: 'deny' } } });
    expect(off).toMatchObject({ enabled: false, status: 'DISABLED' });
    const onV1 = await cp.call('GET', `/v1/policies/${String(off.policy_id)}`, { key });
    expect(onV1.body).toMatchObject({ enabled: false, status: 'DISABLED' });
  });

  it('lists highest priority first, a page at a time, by type and by enabled', async () => {
    await tenantWithKey(cp, 'guide-paging');
    const as = { headers: { 'x-tenant-id': 'guide-paging' } };
    for (const [name, priority, type] of [
      ['low', 10, 'custom'],
      ['high', 900, 'rate_limit'],
      ['mid', 500, 'rate_limit'],
    ] as const) {
      const res = await cp.call('POST', '/api/v1/policies', {
        ...as,
        body: { name, priority, policy_type: type, rules: { r: { action: `tool:${name}`, effect: 'deny' } } },
      });
      expect(res.status).toBe(201);
    }
    const first = await cp.call('GET', '/api/v1/policies?page_size=2', as);
    expect(first.status).toBe(200);
    expect(first.body.policies.map((p: { name: string }) => p.name)).toEqual(['high', 'mid']);
    expect(first.body.next_page_token).toEqual(expect.any(String));
    const second = await cp.call(
      'GET',
      `/api/v1/policies?pageSize=2&pageToken=${String(first.body.next_page_token)}`,
      as,
    );
    expect(second.body.policies.map((p: { name: string }) => p.name)).toEqual(['low']);
    expect(second.body.next_page_token).toBeNull();
    const byType = await cp.call('GET', '/api/v1/policies?policyType=rate_limit', as);
    expect(byType.body.policies.map((p: { name: string }) => p.name)).toEqual(['high', 'mid']);
    const disabled = await cp.call('GET', '/api/v1/policies?enabled=false', as);
    expect(disabled.body.policies).toEqual([]);
    // Twenty by default.
    const all = await cp.call('GET', '/api/v1/policies', as);
    expect(all.body.policies).toHaveLength(3);
  });

  it('changes only the fields given, and deletes', async () => {
    const policy = await created({
      name: 'to-change',
      policy_type: 'content_filter',
      rules: shellRule(),
      tags: { team: 'sec' },
    });
    const id = String(policy.policy_id);
    const patched = await cp.call('PATCH', `/api/v1/policies/${id}`, {
      key,
      body: { enabled: false, policy_type: 'semantic', priority: 42 },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      name: 'to-change',
      enabled: false,
      status: 'DISABLED',
      policy_type: 'semantic',
      priority: 42,
      version: 2,
      tags: { team: 'sec', policy_type: 'semantic' },
      rules: policy.rules,
    });
    const uncompilable = await cp.call('PATCH', `/api/v1/policies/${id}`, {
      key,
      body: {
        enabled: true,
        rules: {
          fine: { action: 'tool:a', effect: 'deny' },
          bad: {
            action: 'tool:b',
            effect: 'deny',
            conditions: [{ field: 'input_text', operator: 'matches', value: '[' }],
          },
        },
      },
    });
    expect(String(expectSvcError(uncompilable, 400, 'SVC-POL-2003').message)).toContain('rules.bad.conditions.0.value');
    expect((await cp.call('GET', `/api/v1/policies/${id}`, { key })).body).toEqual(patched.body);
    const deleted = await cp.call('DELETE', `/api/v1/policies/${id}`, { key });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ policy_id: id, deleted: true });
    expectSvcError(await cp.call('GET', `/api/v1/policies/${id}`, { key }), 404, 'SVC-POL-2002');
    expectSvcError(await cp.call('GET', `/v1/policies/${id}`, { key }), 404, 'SVC-POL-2002');
    expectSvcError(
      await cp.call('PATCH', `/api/v1/policies/${id}`, { key, body: { enabled: true } }),
      404,
      'SVC-POL-2002',
    );
    expectSvcError(await cp.call('DELETE', `/api/v1/policies/${id}`, { key }), 404, 'SVC-POL-2002');
  });

  it('refuses bad input naming the field, and writes nothing', async () => {
    const before = await policyCount();
    const cases: Array<[unknown, string]> = [
      [{ name: 'x', rules: {} }, 'rules'],
      [{ name: 'x', rules: shellRule(), priority: 5000 }, 'priority'],
      [{ name: 'x', rules: shellRule(), policy_type: 'firewall' }, 'policy_type'],
      [{ name: 'x', rules: shellRule(), enabled: 'yes' }, 'enabled'],
      [{ name: 'x', rules: shellRule({ effect: 'maybe' }) }, 'rules.no-rm.effect'],
      [{ rules: shellRule() }, 'name'],
      // Evaluated "2" first whatever the order written, so refused.
      [{ name: 'x', rules: { ...shellRule(), '2': { action: 'tool:*', effect: 'allow' } } }, 'rules.2: a rule id'],
    ];
    for (const [body, field] of cases) {
      const error = expectSvcError(await cp.call('POST', '/api/v1/policies', { key, body }), 400, 'SVC-SYS-9002');
      expect(String(error.message), JSON.stringify(body)).toContain(field);
    }
    // A rule that cannot compile is the policy error, naming the rule's field.
    const uncompilable = await cp.call('POST', '/api/v1/policies', {
      key,
      body: {
        name: 'bad-regex',
        rules: {
          r: { action: 'tool:x', effect: 'deny', conditions: [{ field: 'input_text', operator: 'REGEX', value: '(' }] },
        },
      },
    });
    const error = expectSvcError(uncompilable, 400, 'SVC-POL-2003');
    // Named as the rules object has it: by rule id.
    expect(String(error.message)).toContain('rules.r.conditions.0.value');
    expectSvcError(
      await cp.call('PATCH', '/api/v1/policies/00000000-0000-4000-8000-000000000001', { key, body: {} }),
      400,
      'SVC-SYS-9002',
    );
    for (const [query, field] of [
      ['page_size=101', 'page_size'],
      ['page_size=0', 'page_size'],
      ['page_token=not-a-token', 'page_token'],
    ]) {
      const res = await cp.call('GET', `/api/v1/policies?${query}`, { key });
      expect(String(expectSvcError(res, 400, 'SVC-SYS-9002').message)).toContain(field);
    }
    expect(await policyCount()).toBe(before);
  });

  it('keeps tenants apart', async () => {
    const policy = await created({ name: 'a-only', rules: shellRule() });
    const id = String(policy.policy_id);
    expectSvcError(await cp.call('GET', `/api/v1/policies/${id}`, { key: otherKey }), 404, 'SVC-POL-2002');
    expectSvcError(await cp.call('DELETE', `/api/v1/policies/${id}`, { key: otherKey }), 404, 'SVC-POL-2002');
    expectSvcError(
      await cp.call('POST', '/api/v1/policies', {
        key: otherKey,
        body: { tenant_id: 'guide-a', name: 'x', rules: shellRule() },
      }),
      403,
      'SVC-SYS-9004',
    );
    expect((await cp.call('GET', `/api/v1/policies/${id}`, { key })).status).toBe(200);
  });
});

describe('POST /api/v1/policies/import', () => {
  const valid = (name: string) => ({
    name,
    policy_type: 'rate_limit',
    rules: { r: { action: `tool:${name}`, effect: 'deny' } },
  });

  it('creates every policy in one go, in the order given', async () => {
    const before = await policyCount();
    const res = await cp.call('POST', '/api/v1/policies/import', {
      key,
      body: [valid('imp-1'), valid('imp-2'), { ...valid('imp-3'), enabled: false }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.imported).toBe(3);
    expect(res.body.policies.map((p: { name: string; enabled: boolean }) => [p.name, p.enabled])).toEqual([
      ['imp-1', true],
      ['imp-2', true],
      ['imp-3', false],
    ]);
    expect(await policyCount()).toBe(before + 3);
  });

  it('writes nothing when one policy is invalid, naming its index and field', async () => {
    const before = await policyCount();
    const schema = await cp.call('POST', '/api/v1/policies/import', {
      key,
      body: [valid('ok-1'), { ...valid('bad'), priority: 0 }, valid('ok-2')],
    });
    expect(String(expectSvcError(schema, 400, 'SVC-SYS-9002').message)).toContain('1.priority');
    const numbered = await cp.call('POST', '/api/v1/policies/import', {
      key,
      body: [valid('ok-1'), { name: 'numbered', rules: { '10': { action: 'tool:x', effect: 'deny' } } }],
    });
    expect(String(expectSvcError(numbered, 400, 'SVC-SYS-9002').message)).toContain('1.rules.10: a rule id');
    const compile = await cp.call('POST', '/api/v1/policies/import', {
      key,
      body: [
        valid('ok-1'),
        valid('ok-2'),
        {
          name: 'bad',
          rules: {
            r: {
              action: 'tool:x',
              effect: 'deny',
              conditions: [{ field: 'input_text', operator: 'matches', value: '(' }],
            },
          },
        },
      ],
    });
    const error = expectSvcError(compile, 400, 'SVC-POL-2003');
    expect(String(error.message)).toContain('2.rules.r.conditions.0.value');
    expect((error.details as { field_violations: Array<{ field: string }> }).field_violations[0]!.field).toBe(
      '2.rules.r.conditions.0.value',
    );
    const foreign = await cp.call('POST', '/api/v1/policies/import', {
      key,
      body: [valid('ok-1'), { ...valid('x'), tenant_id: 'guide-b' }],
    });
    expect(String(expectSvcError(foreign, 400, 'SVC-SYS-9002').message)).toMatch(/\b1\b.*tenant_id/);
    expectSvcError(await cp.call('POST', '/api/v1/policies/import', { key, body: [] }), 400, 'SVC-SYS-9002');
    expectSvcError(
      await cp.call('POST', '/api/v1/policies/import', { key, body: { policies: [valid('x')] } }),
      400,
      'SVC-SYS-9002',
    );
    expect(await policyCount()).toBe(before);
    expect(await policyCount(otherKey)).toBe(0);
  });
});

describe('POST /api/v1/evaluate', () => {
  it('decides a policy created on /api/v1 as /v1/policies/evaluate does, and /v1 shows the policy', async () => {
    await tenantWithKey(cp, 'guide-eval');
    const as = { headers: { 'x-tenant-id': 'guide-eval' } };
    const made = await cp.call('POST', '/api/v1/policies', {
      ...as,
      body: { name: 'shell-guard', policy_type: 'tool_restriction', rules: shellRule(), priority: 800 },
    });
    expect(made.status).toBe(201);
    const id = String(made.body.policy_id);
    const onV1 = await cp.call('GET', `/v1/policies/${id}`, as);
    expect(onV1.status).toBe(200);
    expect(onV1.body).toMatchObject({
      policy_id: id,
      enabled: true,
      priority: 800,
      rules: [{ rule_id: 'no-rm', action: 'tool:shell', effect: 'deny' }],
    });
    const listed = await cp.call('GET', '/v1/policies', as);
    expect(listed.body.map((p: { policy_id: string }) => p.policy_id)).toContain(id);

    for (const [text, allowed] of [
      ['please rm -rf /tmp/x', false],
      ['ls -la', true],
    ] as const) {
      const guide = await cp.call('POST', '/api/v1/evaluate', {
        ...as,
        body: { action: 'tool:shell', input_text: text, workflow_id: 'wf-7' },
      });
      const v1 = await cp.call('POST', '/v1/policies/evaluate', {
        ...as,
        body: { action: 'tool:shell', context: { input_text: text, workflow_id: 'wf-7' } },
      });
      expect([guide.status, v1.status]).toEqual([200, 200]);
      const decided = (b: Record<string, unknown>) => ({
        allowed: b.allowed,
        effect: b.effect,
        decision: b.decision,
        matched_policy: b.matched_policy,
        matched_rule: b.matched_rule,
        reason: b.reason,
      });
      expect(decided(guide.body)).toEqual(decided(v1.body));
      expect(guide.body.allowed).toBe(allowed);
      if (!allowed) expect(guide.body).toMatchObject({ decision: 'DENY', matched_policy: id, matched_rule: 'no-rm' });
    }
    // Switched off on /api/v1, the policy no longer decides on either route.
    expect((await cp.call('PATCH', `/api/v1/policies/${id}`, { ...as, body: { enabled: false } })).status).toBe(200);
    const v1After = await cp.call('POST', '/v1/policies/evaluate', {
      ...as,
      body: { action: 'tool:shell', context: { input_text: 'rm -rf /' } },
    });
    expect(v1After.body).toMatchObject({ allowed: true, effect: 'no_match' });
  });

  it('denies a model under its family name and a tool under any case, as the proxy does', async () => {
    await tenantWithKey(cp, 'guide-names');
    const as = { headers: { 'x-tenant-id': 'guide-names' } };
    const made = await cp.call('POST', '/api/v1/policies', {
      ...as,
      body: {
        name: 'names',
        rules: {
          'no-gpt-4o': {
            action: 'llm:*',
            effect: 'deny',
            conditions: [{ field: 'model', operator: 'EQUALS', value: 'gpt-4o' }],
          },
          'no-delete': {
            action: 'tool:*',
            effect: 'deny',
            conditions: [{ field: 'tool_name', operator: 'IN', value: ['DeleteRepo'] }],
          },
        },
      },
    });
    expect(made.status).toBe(201);
    const decide = async (action: string, context: Record<string, unknown>): Promise<unknown> =>
      (await cp.call('POST', '/v1/policies/evaluate', { ...as, body: { action, context } })).body as unknown;
    for (const model of ['GPT-4o', 'gpt-4o-2024-08-06', 'openai/gpt-4o'])
      expect(await decide(`llm:${model}`, { model }), model).toMatchObject({
        decision: 'DENY',
        matched_rule: 'no-gpt-4o',
      });
    expect(await decide('llm:gpt-4o-mini', { model: 'gpt-4o-mini' })).toMatchObject({ allowed: true });
    expect(await decide('tool:DELETEREPO', { tool_name: 'DELETEREPO' })).toMatchObject({ matched_rule: 'no-delete' });
  });

  it('opens the pending approval of a REQUIRE_APPROVAL rule with the workflow id', async () => {
    await tenantWithKey(cp, 'guide-hitl');
    const as = { headers: { 'x-tenant-id': 'guide-hitl' } };
    await cp.call('POST', '/api/v1/policies', {
      ...as,
      body: {
        name: 'hitl',
        policy_type: 'approval',
        rules: { ask: { action: 'tool:deploy', effect: 'require_approval' } },
      },
    });
    const res = await cp.call('POST', '/api/v1/evaluate', {
      ...as,
      body: { action: 'tool:deploy', workflow_id: 'wf-9' },
    });
    expect(res.body).toMatchObject({ allowed: false, decision: 'REQUIRE_APPROVAL' });
    const approval = await cp.call('GET', `/v1/approvals/${String(res.body.approval_id)}`, as);
    expect(approval.body).toMatchObject({ status: 'PENDING', workflow_id: 'wf-9', action: 'tool:deploy' });
  });

  it('refuses bad input naming the field', async () => {
    for (const [body, field] of [
      [{}, 'action'],
      [{ action: 'tool:x', workflow_id: 5 }, 'workflow_id'],
      [{ action: 'tool:x', input_text: 'x'.repeat(100_001) }, 'input_text'],
      [{ action: 'tool:x', trace_id: 'nope' }, 'trace_id'],
      [{ action: 'tool:x', verdict: 'allow' }, 'verdict'],
    ] as const) {
      const res = await cp.call('POST', '/api/v1/evaluate', { key, body });
      expect(String(expectSvcError(res, 400, 'SVC-SYS-9002').message), JSON.stringify(body)).toContain(field);
    }
  });
});

describe('/api/v1/traces', () => {
  let as: { headers: Record<string, string> };
  beforeAll(async () => {
    await tenantWithKey(cp, 'guide-traces');
    as = { headers: { 'x-tenant-id': 'guide-traces' } };
    const policy = await cp.call('POST', '/api/v1/policies', { ...as, body: { name: 'guard', rules: shellRule() } });
    expect(policy.status).toBe(201);
  });

  async function envelope(): Promise<string> {
    const res = await cp.call('POST', '/v1/envelopes', { ...as, body: { adapter_type: 'custom' } });
    expect(res.status).toBe(201);
    return String(res.body.envelope_id);
  }

  it('shows an envelope as a trace with its events and the evaluations made against it', async () => {
    const id = await envelope();
    const fresh = await cp.call('GET', `/api/v1/traces/${id}`, as);
    expect(fresh.status).toBe(200);
    expect(fresh.body).toMatchObject({
      trace_id: id,
      envelope_id: id,
      status: 'PENDING',
      state: 'AUTHORIZED',
      events: [],
    });
    const event = await cp.call('POST', `/v1/envelopes/${id}/events`, {
      ...as,
      body: {
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        model: 'gpt-4o',
        tokens: { input: 10, output: 5 },
        cost_usd: 0.5,
      },
    });
    expect(event.status).toBe(202);
    for (const text of ['ls', 'rm -rf /']) {
      const res = await cp.call('POST', '/api/v1/evaluate', {
        ...as,
        body: { action: 'tool:shell', input_text: text, trace_id: id },
      });
      expect(res.status).toBe(200);
    }
    // Evaluated through /v1 with the envelope id, it belongs to the trace too.
    await cp.call('POST', '/v1/policies/evaluate', { ...as, body: { action: 'tool:grep', envelope_id: id } });
    // Not against this trace: left out.
    await cp.call('POST', '/api/v1/evaluate', { ...as, body: { action: 'tool:shell', input_text: 'rm -rf /' } });

    const detail = await cp.call('GET', `/api/v1/traces/${id}`, as);
    expect(detail.body).toMatchObject({
      status: 'RUNNING',
      cost_summary: { tokens_input: 10, tokens_output: 5, cost_usd: 0.5 },
      events: [{ event_type: 'llm.call', model: 'gpt-4o', cost_usd: 0.5 }],
      events_truncated: false,
      duration_ms: null,
    });
    const evaluations = await cp.call('GET', `/api/v1/traces/${id}/evaluations`, as);
    expect(evaluations.status).toBe(200);
    expect(
      evaluations.body.evaluations.map((e: { action: string; decision: string }) => [e.action, e.decision]),
    ).toEqual([
      ['tool:shell', 'ALLOW'],
      ['tool:shell', 'DENY'],
      ['tool:grep', 'ALLOW'],
    ]);
    expect(evaluations.body.evaluations[1]).toMatchObject({ matched_rule: 'no-rm', actor: { type: 'bootstrap' } });
    const paged = await cp.call('GET', `/api/v1/traces/${id}/evaluations?page_size=2`, as);
    expect(paged.body.evaluations).toHaveLength(2);
    const rest = await cp.call(
      'GET',
      `/api/v1/traces/${id}/evaluations?page_size=2&page_token=${String(paged.body.next_page_token)}`,
      as,
    );
    expect(rest.body.evaluations.map((e: { action: string }) => e.action)).toEqual(['tool:grep']);
    expect(rest.body.next_page_token).toBeNull();
  });

  it('lists traces newest first in the guides’ states, a page at a time', async () => {
    const ended = await envelope();
    expect((await cp.call('POST', `/v1/envelopes/${ended}/terminate`, { ...as, body: {} })).status).toBe(200);
    const newest = await envelope();
    const list = await cp.call('GET', '/api/v1/traces?limit=2', as);
    expect(list.status).toBe(200);
    expect(list.body.traces.map((t: { trace_id: string }) => t.trace_id)).toEqual([newest, ended]);
    const terminated = list.body.traces[1] as Record<string, unknown>;
    expect(terminated).toMatchObject({ status: 'FAILED', state: 'TERMINATED' });
    expect(terminated.duration_ms).toEqual(expect.any(Number));
    const next = await cp.call('GET', `/api/v1/traces?page_size=2&page_token=${String(list.body.next_page_token)}`, as);
    const seen = [...list.body.traces, ...next.body.traces].map((t: { trace_id: string }) => t.trace_id);
    expect(new Set(seen).size).toBe(seen.length);
    const failed = await cp.call('GET', '/api/v1/traces?status=FAILED', as);
    expect(failed.body.traces.map((t: { trace_id: string }) => t.trace_id)).toEqual([ended]);
  });

  it('answers an unknown trace with 404 and keeps tenants apart', async () => {
    const id = await envelope();
    expectSvcError(await cp.call('GET', `/api/v1/traces/${id}`, { key: otherKey }), 404, 'SVC-ENV-1001');
    expectSvcError(await cp.call('GET', `/api/v1/traces/${id}/evaluations`, { key: otherKey }), 404, 'SVC-ENV-1001');
    const unknown = '00000000-0000-4000-8000-00000000dead';
    expectSvcError(await cp.call('GET', `/api/v1/traces/${unknown}`, as), 404, 'SVC-ENV-1001');
    expect((await cp.call('GET', '/api/v1/traces', { key: otherKey })).body.traces).toEqual([]);
    for (const [query, field] of [
      ['status=DONE', 'status'],
      ['limit=500', 'limit'],
      ['page_token=%21%21', 'page_token'],
    ]) {
      const res = await cp.call('GET', `/api/v1/traces?${query}`, as);
      expect(String(expectSvcError(res, 400, 'SVC-SYS-9002').message)).toContain(field);
    }
  });
});

describe('/api/v1/config and /api/v1/features', () => {
  it('tells the caller its tenant, credential and the public service settings', async () => {
    const res = await cp.call('GET', '/api/v1/config', { key: readerKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      tenant_id: 'guide-a',
      name: 'guide-a',
      credential: { type: 'api_key', scopes: ['policies:read'] },
      service: { page_size: { default: 20, max: 100 }, rate_limit_per_minute: 600 },
    });
    expect(JSON.stringify(res.body)).not.toContain(readerKey);
  });

  it('names each feature and whether the configuration switched it on', async () => {
    const list = await cp.call('GET', '/api/v1/features', { key: readerKey });
    expect(list.status).toBe(200);
    const names = list.body.features.map((f: { name: string }) => f.name);
    expect(names).toEqual(expect.arrayContaining(['nats', 'postgres_storage', 'oracle_overrun_watch']));
    const storage = await cp.call('GET', '/api/v1/features/postgres_storage', { key: readerKey });
    expect(storage.body).toMatchObject({ name: 'postgres_storage', enabled: cp.databaseUrl !== null });
    const nats = await cp.call('GET', '/api/v1/features/nats', { key: readerKey });
    expect(nats.body).toMatchObject({ enabled: false, settings: ['SVC_NATS_URL'] });
    const error = expectSvcError(
      await cp.call('GET', '/api/v1/features/teleport', { key: readerKey }),
      404,
      'SVC-SYS-9006',
    );
    expect(String(error.message)).toContain('teleport');
  });

  const feature = async (name: string, as = key) =>
    (await cp.call('GET', `/api/v1/features/${name}`, { key: as })).body as Record<string, unknown>;

  it("switches a switchable feature for the caller's tenant alone, audited", async () => {
    expect(await feature('oracle_overrun_watch')).toMatchObject({ enabled: true, switchable: true });
    expect(await feature('nats')).toMatchObject({ switchable: false });
    const off = await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key, body: { enabled: false } });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ name: 'oracle_overrun_watch', enabled: false, switchable: true });
    expect(await feature('oracle_overrun_watch', readerKey)).toMatchObject({ enabled: false });
    expect(await feature('oracle_overrun_watch', otherKey)).toMatchObject({ enabled: true });
    // Asked again, nothing changes and nothing more is recorded.
    expect(
      (await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key, body: { enabled: false } })).status,
    ).toBe(200);
    const on = await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key, body: { enabled: true } });
    expect(on.body).toMatchObject({ enabled: true });
    // Newest first.
    const audit = await cp.call('GET', '/v1/audit?action=feature.update', { key });
    const records = audit.body as Array<{ resource: { id: string }; metadata: { enabled: boolean } }>;
    expect(records.map((r) => [r.resource.id, r.metadata.enabled])).toEqual([
      ['oracle_overrun_watch', true],
      ['oracle_overrun_watch', false],
    ]);
  });

  it('refuses a switch the configuration decides, a bad body and a caller without admin', async () => {
    const fixed = expectSvcError(
      await cp.call('PATCH', '/api/v1/features/nats', { key, body: { enabled: true } }),
      501,
      'SVC-SYS-9011',
    );
    expect(fixed.details).toMatchObject({ feature: 'nats', field: 'enabled', settings: ['SVC_NATS_URL'] });
    // The state it is in is no change.
    expect((await cp.call('PATCH', '/api/v1/features/nats', { key, body: { enabled: false } })).body).toMatchObject({
      enabled: false,
    });
    for (const body of [{}, { enabled: 'no' }, { enabled: false, scope: 'all' }]) {
      const bad = expectSvcError(
        await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key, body }),
        400,
        'SVC-SYS-9002',
      );
      expect(JSON.stringify(bad), JSON.stringify(body)).toMatch(/enabled|scope/);
    }
    expectSvcError(
      await cp.call('PATCH', '/api/v1/features/teleport', { key, body: { enabled: false } }),
      404,
      'SVC-SYS-9006',
    );
    expectSvcError(
      await cp.call('PATCH', '/api/v1/features/oracle_overrun_watch', { key: readerKey, body: { enabled: false } }),
      403,
      'SVC-SYS-9004',
    );
    expect(await feature('oracle_overrun_watch')).toMatchObject({ enabled: true });
  });
});

describe('the OpenAPI document', () => {
  it('documents every /api/v1 route with its answers', async () => {
    const doc = (await cp.call('GET', '/openapi.json', { key: null })).body as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    const expected: Array<[string, string, string]> = [
      ['get', '/api/v1/policies', '200'],
      ['post', '/api/v1/policies', '201'],
      ['post', '/api/v1/policies/import', '201'],
      ['get', '/api/v1/policies/{policy_id}', '404'],
      ['patch', '/api/v1/policies/{policy_id}', '200'],
      ['delete', '/api/v1/policies/{policy_id}', '200'],
      ['post', '/api/v1/evaluate', '200'],
      ['get', '/api/v1/traces', '200'],
      ['get', '/api/v1/traces/{trace_id}', '404'],
      ['get', '/api/v1/traces/{trace_id}/evaluations', '200'],
      ['get', '/api/v1/config', '200'],
      ['get', '/api/v1/features/{name}', '404'],
      ['patch', '/api/v1/features/{name}', '501'],
      ['get', '/version', '200'],
    ];
    for (const [method, path, status] of expected) {
      expect(doc.paths[path]?.[method]?.responses[status], `${method} ${path} ${status}`).toBeDefined();
    }
  });
});

it('announces the ruleset of an import once, as one version', async () => {
  await tenantWithKey(cp, 'guide-sync');
  const as = { headers: { 'x-tenant-id': 'guide-sync' } };
  const before = await cp.plane.services.policies.version('guide-sync');
  const res = await cp.call('POST', '/api/v1/policies/import', {
    ...as,
    body: ['a', 'b', 'c'].map((n) => ({ name: n, rules: { r: { action: `tool:${n}`, effect: 'deny' } } })),
  });
  expect(res.status).toBe(201);
  await eventually(
    () => cp.plane.services.policies.version('guide-sync'),
    (v) => v === before + 1,
  );
});
