import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { callFails, callOk, mcpClient } from './mcp-client.ts';

let cp: RunningControlPlane;
let a: Client;
let b: Client;
/** Tenant A's records, made through MCP (and one envelope through REST). */
const owned = { policyId: '', budgetId: '', approvalId: '', keyId: '', envelopeId: '' };

beforeAll(async () => {
  cp = await startControlPlane();
  const keyA = await tenantWithKey(cp, 'iso-a');
  const keyB = await tenantWithKey(cp, 'iso-b');
  a = await mcpClient(cp.url, keyA);
  b = await mcpClient(cp.url, keyB);
  const { policy } = await callOk(a, 'create_policy', {
    name: 'a-rules',
    policy_type: 'approval',
    rules: {
      'ask-deploy': { action: 'tool:deploy', effect: 'require_approval' },
      'no-shell': { action: 'tool:shell', effect: 'deny' },
    },
  });
  await callOk(a, 'update_policy_status', { policy_id: policy.id, status: 'ACTIVE' });
  const { budget } = await callOk(a, 'create_budget', { name: 'a-budget', limit_amount: 5, period: 'DAILY' });
  const decision = await callOk(a, 'check_governance', { action: 'tool:deploy', input_text: 'deploy prod' });
  const { api_key: apiKey } = await callOk(a, 'create_api_key', { name: 'a-extra' });
  const envelope = await cp.call('POST', '/v1/envelopes', {
    key: keyA,
    body: { budget_id: budget.id, adapter_type: 'custom' },
  });
  expect(envelope.status).toBe(201);
  Object.assign(owned, {
    policyId: policy.id,
    budgetId: budget.id,
    approvalId: decision.approval_id,
    keyId: apiKey.id,
    envelopeId: envelope.body.envelope_id,
  });
}, 60_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await cp.close();
});

/** Fails if any of tenant A's ids appears in what tenant B was given. */
function expectNothingOfA(value: unknown, what: string): void {
  const text = JSON.stringify(value);
  for (const [name, id] of Object.entries(owned)) expect(text.includes(id), `${what} shows A's ${name}`).toBe(false);
}

describe("two tenants' keys over MCP", () => {
  it("refuse every tool naming the other tenant's records as not found, changing nothing", async () => {
    const attempts: Array<[string, Record<string, unknown>, string]> = [
      ['get_policy', { policy_id: owned.policyId }, 'SVC-POL-2002'],
      ['update_policy', { policy_id: owned.policyId, priority: 1 }, 'SVC-POL-2002'],
      ['update_policy_status', { policy_id: owned.policyId, status: 'INACTIVE' }, 'SVC-POL-2002'],
      ['delete_policy', { policy_id: owned.policyId }, 'SVC-POL-2002'],
      ['get_budget', { budget_id: owned.budgetId }, 'SVC-BUD-3002'],
      ['get_budget_status', { budget_id: owned.budgetId }, 'SVC-BUD-3002'],
      ['approve_action', { approval_id: owned.approvalId }, 'SVC-POL-2005'],
      ['deny_action', { approval_id: owned.approvalId, reason: 'mine now' }, 'SVC-POL-2005'],
      ['revoke_api_key', { key_id: owned.keyId }, 'SVC-SYS-9006'],
    ];
    for (const [tool, args, code] of attempts) expect((await callFails(b, tool, args)).code, tool).toBe(code);

    const policy = (await callOk(a, 'get_policy', { policy_id: owned.policyId })).policy;
    expect(policy).toMatchObject({ status: 'ACTIVE', priority: 100, version: 2 });
    const pending = await callOk(a, 'list_pending_approvals');
    expect(pending.approvals.map((x: { approval_id: string }) => x.approval_id)).toEqual([owned.approvalId]);
    const keys = await callOk(a, 'list_api_keys');
    expect(keys.api_keys.find((k: { id: string }) => k.id === owned.keyId).status).toBe('active');
  });

  it("never show one tenant's policies, budgets, keys, approvals, audit entries or metrics to the other", async () => {
    const reads: Array<[string, Record<string, unknown>]> = [
      ['list_policies', {}],
      ['list_budgets', {}],
      ['list_pending_approvals', {}],
      ['list_api_keys', {}],
      ['get_audit_log', {}],
      ['get_metrics', {}],
    ];
    for (const [tool, args] of reads) expectNothingOfA(await callOk(b, tool, args), tool);
    expect((await callOk(b, 'list_policies')).policies).toEqual([]);
    expect((await callOk(b, 'list_budgets')).budgets).toEqual([]);
    expect((await callOk(b, 'list_pending_approvals')).approvals).toEqual([]);
    expect((await callOk(b, 'get_metrics', { metric_type: 'policy' })).policy.evaluations).toBe(0);
    for (const entry of (await callOk(b, 'get_audit_log')).entries)
      expect(entry.action.startsWith('policy.') || entry.action.startsWith('approval.'), entry.action).toBe(false);
  });

  it('decide with their own policies only', async () => {
    expect((await callOk(a, 'check_governance', { action: 'tool:shell', input_text: 'rm' })).decision).toBe('DENY');
    expect((await callOk(b, 'check_governance', { action: 'tool:shell', input_text: 'rm' })).decision).toBe('ALLOW');
    expect((await callOk(b, 'check_governance', { action: 'tool:deploy', input_text: 'x' })).approval_id).toBeNull();
  });

  it('read only their own resources', async () => {
    for (const uri of ['envelopes://latest', 'policies://active', 'tenant://status', 'tenant://config']) {
      const read = await b.readResource({ uri });
      const body = JSON.parse(String((read.contents[0] as { text: string }).text));
      expectNothingOfA(body, uri);
      expect(JSON.stringify(body)).not.toContain('iso-a');
    }
    const mine = await a.readResource({ uri: 'envelopes://latest' });
    expect(String((mine.contents[0] as { text: string }).text)).toContain(owned.envelopeId);
  });

  it("keep what one creates out of the other's lists", async () => {
    const { policy } = await callOk(b, 'create_policy', {
      name: 'b-rules',
      policy_type: 'custom',
      rules: { r: { action: 'tool:x', effect: 'deny' } },
    });
    const { budget } = await callOk(b, 'create_budget', { name: 'b-budget', limit_amount: 1, period: 'WEEKLY' });
    const seen = JSON.stringify([await callOk(a, 'list_policies'), await callOk(a, 'list_budgets')]);
    expect(seen).not.toContain(policy.id);
    expect(seen).not.toContain(budget.id);
  });
});
