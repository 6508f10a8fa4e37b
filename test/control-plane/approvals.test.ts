import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusMessage } from '../../core/bus/bus.ts';
import { MAX_HELD_CONTEXT_BYTES } from '../../core/sync/contract.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

let cp: RunningControlPlane;
let key: string;
let otherKey: string;
/** A second credential of the requesting tenant: the one that decides what `key` asked for. */
let reviewerKey: string;
/** The ids of `key` and `reviewerKey`: what an approval records as its reviewer. */
let keyId: string;
let reviewerKeyId: string;

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'appr-a');
  otherKey = await tenantWithKey(cp, 'appr-b');
  const reviewer = await cp.call('POST', '/v1/api-keys', {
    key,
    body: { name: 'reviewer', scopes: ['policies:read', 'policies:write'] },
  });
  expect(reviewer.status).toBe(201);
  reviewerKey = String(reviewer.body.key_secret);
  reviewerKeyId = String(reviewer.body.id);
  keyId = String((await cp.call('GET', '/api/v1/config', { key })).body.credential.id);
  const policy = await cp.call('POST', '/v1/policies', {
    key,
    body: {
      name: 'hitl',
      priority: 500,
      rules: [
        { action: 'tool:payment*', effect: 'require_approval', message: 'payments need a human' },
        { action: 'execution:start', effect: 'require_approval' },
      ],
    },
  });
  expect(policy.status).toBe(201);
}, 60_000);
afterAll(async () => cp.close());

async function pendingFromEvaluation(context: Record<string, unknown> = {}): Promise<string> {
  const res = await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'tool:payment', context } });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ allowed: false, effect: 'deny' });
  return String(res.body.approval_id);
}

describe('approvals as records', () => {
  it('opens a PENDING approval with who, what and why, and announces it', async () => {
    const id = await pendingFromEvaluation({ workflow_id: 'wf-1', amount: 500 });
    const res = await cp.call('GET', `/v1/approvals/${id}`, { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      approval_id: id,
      tenant_id: 'appr-a',
      status: 'PENDING',
      action: 'tool:payment',
      context: { workflow_id: 'wf-1', amount: 500 },
      workflow_id: 'wf-1',
      requested_by: { type: 'api_key' },
      reason: 'payments need a human',
    });
    const event = await eventually(
      () => cp.published.find((m) => m.subject === 'svc.appr-a.policies.approval.requested'),
      (m) => m !== undefined,
    );
    expect(event?.data).toMatchObject({ tenant_id: 'appr-a', approval: { approval_id: id, status: 'PENDING' } });
  });

  it('opens one when envelope creation needs approval, naming it in the 403', async () => {
    const res = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    const error = expectSvcError(res, 403, 'SVC-POL-2004');
    const id = String((error.details as Record<string, unknown>).approval_id);
    const approval = await cp.call('GET', `/v1/approvals/${id}`, { key });
    expect(approval.body).toMatchObject({ status: 'PENDING', action: 'execution:start' });
  });

  it('lists by status and workflow, and keeps tenants apart', async () => {
    const id = await pendingFromEvaluation({ workflow_id: 'wf-list' });
    const byWorkflow = await cp.call('GET', '/v1/approvals?status=PENDING&workflowId=wf-list', { key });
    expect(byWorkflow.body.map((a: { approval_id: string }) => a.approval_id)).toEqual([id]);
    expect((await cp.call('GET', '/v1/approvals?status=APPROVED', { key })).body).toEqual([]);
    expect((await cp.call('GET', '/v1/approvals', { key: otherKey })).body).toEqual([]);
    expectSvcError(await cp.call('GET', `/v1/approvals/${id}`, { key: otherKey }), 404, 'SVC-POL-2005');
    expectSvcError(
      await cp.call('PATCH', `/v1/approvals/${id}`, {
        key: otherKey,
        body: { status: 'APPROVED', reviewer_id: 'mallory' },
      }),
      404,
      'SVC-POL-2005',
    );
  });

  it('lists oldest first and stops at the limit', async () => {
    const first = await pendingFromEvaluation({ workflow_id: 'wf-order' });
    const second = await pendingFromEvaluation({ workflow_id: 'wf-order' });
    const third = await pendingFromEvaluation({ workflow_id: 'wf-order' });
    const all = await cp.call('GET', '/v1/approvals?workflow_id=wf-order', { key });
    expect(all.body.map((a: { approval_id: string }) => a.approval_id)).toEqual([first, second, third]);
    const two = await cp.call('GET', '/v1/approvals?workflow_id=wf-order&limit=2', { key });
    expect(two.body.map((a: { approval_id: string }) => a.approval_id)).toEqual([first, second]);
    expectSvcError(await cp.call('GET', '/v1/approvals?limit=0', { key }), 400, 'SVC-SYS-9002');
  });

  it('is decided once: audited with the actor, announced; a second decision is a 409', async () => {
    const id = await pendingFromEvaluation();
    const decided = await cp.call('PATCH', `/v1/approvals/${id}`, {
      key: reviewerKey,
      body: { status: 'REJECTED', review_note: 'not this one' },
    });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ status: 'REJECTED', reviewer_id: reviewerKeyId, review_note: 'not this one' });
    expect(Number.isNaN(Date.parse(decided.body.decided_at))).toBe(false);

    const again = await cp.call('PATCH', `/v1/approvals/${id}`, {
      key: reviewerKey,
      body: { status: 'APPROVED', reviewer_id: 'bob' },
    });
    expect(expectSvcError(again, 409, 'SVC-POL-2006').details).toMatchObject({ status: 'REJECTED' });
    expect((await cp.call('GET', `/v1/approvals/${id}`, { key })).body).toMatchObject({ status: 'REJECTED' });

    const audit = await cp.call('GET', '/v1/audit?resource_type=approval', { key });
    expect(audit.body).toHaveLength(1);
    expect(audit.body[0]).toMatchObject({
      action: 'approval.reject',
      actor: { type: 'api_key' },
      resource: { type: 'approval', id },
      result: 'rejected',
      metadata: { reviewer_id: reviewerKeyId },
    });
    const event = await eventually(
      () => cp.published.find((m) => m.subject === 'svc.appr-a.policies.approval.decided'),
      (m) => m !== undefined,
    );
    expect(event?.data).toMatchObject({
      approval: { approval_id: id, status: 'REJECTED', reviewer_id: reviewerKeyId },
    });
  });

  it('records the deciding credential as the reviewer, whatever reviewer_id the body names', async () => {
    const id = await pendingFromEvaluation();
    const decided = await cp.call('PATCH', `/v1/approvals/${id}`, {
      key: reviewerKey,
      body: { status: 'APPROVED', reviewer_id: 'ciso@appr-a.example', review_note: 'fine' },
    });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ status: 'APPROVED', reviewer_id: reviewerKeyId, review_note: 'fine' });
    expect((await cp.call('GET', `/v1/approvals/${id}`, { key })).body.reviewer_id).toBe(reviewerKeyId);
    const audit = await cp.call('GET', '/v1/audit?resource_type=approval', { key });
    const record = audit.body.find((r: { resource: { id: string } }) => r.resource.id === id);
    expect(record).toMatchObject({ actor: { type: 'api_key', id: reviewerKeyId } });
    expect(record.metadata.reviewer_id).toBe(reviewerKeyId);
    expect(JSON.stringify(audit.body)).not.toContain('ciso@appr-a.example');
  });

  it('lets exactly one of concurrent decisions win', async () => {
    const id = await pendingFromEvaluation();
    const answers = await Promise.all(
      ['r1', 'r2', 'r3'].map((reviewer) =>
        cp.call('PATCH', `/v1/approvals/${id}`, {
          key: reviewerKey,
          body: { status: 'APPROVED', reviewer_id: reviewer },
        }),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409]);
  });

  it('refuses a decision by the credential that asked for the approval (403 SVC-SYS-9004), keeping it PENDING', async () => {
    const id = await pendingFromEvaluation();
    for (const status of ['APPROVED', 'REJECTED']) {
      const self = await cp.call('PATCH', `/v1/approvals/${id}`, {
        key,
        body: { status, reviewer_id: 'ciso@appr-a.example' },
      });
      const error = expectSvcError(self, 403, 'SVC-SYS-9004');
      expect(error.message).toContain('requested by this credential');
      expect(error.details).toMatchObject({ approval_id: id, reason: 'requester_cannot_decide' });
    }
    expect((await cp.call('GET', `/v1/approvals/${id}`, { key })).body).toMatchObject({ status: 'PENDING' });
    const audit = await cp.call('GET', '/v1/audit?resource_type=approval', { key });
    expect(audit.body.filter((r: { resource: { id: string } }) => r.resource.id === id)).toEqual([]);
    const decided = await cp.call('PATCH', `/v1/approvals/${id}`, {
      key: reviewerKey,
      body: { status: 'APPROVED', reviewer_id: 'ciso@appr-a.example' },
    });
    expect(decided.status).toBe(200);
  });

  it('needs policies:write to decide and policies:read to list', async () => {
    const id = await pendingFromEvaluation();
    const reader = await cp.call('POST', '/v1/api-keys', { key, body: { name: 'reader', scopes: ['policies:read'] } });
    const none = await cp.call('POST', '/v1/api-keys', { key, body: { name: 'none', scopes: ['budgets:read'] } });
    expect((await cp.call('GET', '/v1/approvals', { key: reader.body.key_secret })).status).toBe(200);
    expectSvcError(await cp.call('GET', '/v1/approvals', { key: none.body.key_secret }), 403, 'SVC-SYS-9004');
    expectSvcError(
      await cp.call('PATCH', `/v1/approvals/${id}`, {
        key: reader.body.key_secret,
        body: { status: 'APPROVED', reviewer_id: 'x' },
      }),
      403,
      'SVC-SYS-9004',
    );
    expect((await cp.call('GET', `/v1/approvals/${id}`, { key })).body.status).toBe('PENDING');
  });
});

describe('evaluation by a credential without envelopes:write', () => {
  it('decides without opening an approval, announcing or auditing anything; an agent key still opens one', async () => {
    const withScopes = async (name: string, scopes?: string[]) => {
      const created = await cp.call('POST', '/v1/api-keys', { key, body: { name, scopes } });
      expect(created.status).toBe(201);
      return { secret: String(created.body.key_secret), id: String(created.body.id) };
    };
    const reader = await withScopes('policy-reader', ['policies:read']);
    const noShell = await cp.call('POST', '/v1/policies', {
      key,
      body: { name: 'no-shell', priority: 400, rules: [{ action: 'tool:shell', effect: 'deny' }] },
    });
    expect(noShell.status).toBe(201);
    const approvals = async () => (await cp.call('GET', '/v1/approvals?limit=1000', { key })).body.length as number;
    const before = await approvals();
    for (const [path, body] of [
      ['/v1/policies/evaluate', { action: 'tool:payment', context: { workflow_id: 'wf-read' } }],
      ['/api/v1/evaluate', { action: 'tool:payment', input_text: 'pay', workflow_id: 'wf-read' }],
    ] as const) {
      const asked = await cp.call('POST', path, { key: reader.secret, body });
      expect(asked.status, path).toBe(200);
      expect(asked.body, path).toMatchObject({ allowed: false, effect: 'deny', matched_rule: expect.any(String) });
      expect(asked.body, path).not.toHaveProperty('approval_id');
    }
    // A denial is answered too, and announces nothing.
    const denied = await cp.call('POST', '/v1/policies/evaluate', {
      key: reader.secret,
      body: { action: 'tool:shell', context: {} },
    });
    expect(denied.body).toMatchObject({ allowed: false, effect: 'deny', matched_policy: noShell.body.policy_id });
    expect(await approvals()).toBe(before);
    expect((await cp.call('GET', `/v1/audit?actor_id=${reader.id}`, { key })).body).toEqual([]);

    // The default scopes of a key (an agent's, with envelopes:write) open the approval as before.
    const agent = await withScopes('agent');
    const asked = await cp.call('POST', '/v1/policies/evaluate', {
      key: agent.secret,
      body: { action: 'tool:payment', context: { workflow_id: 'wf-read' } },
    });
    expect(asked.body.approval_id).toEqual(expect.any(String));
    expect(await approvals()).toBe(before + 1);
    // The outbox publishes in commit order: once the agent's approval is announced, anything the
    // reader's evaluations had announced would have been too.
    const requested = (m: BusMessage) =>
      m.subject === 'svc.appr-a.policies.approval.requested' &&
      (m.data as { approval: { workflow_id?: string } }).approval.workflow_id === 'wf-read';
    await eventually(
      () => cp.published.filter(requested).length,
      (n) => n > 0,
    );
    expect(
      cp.published.filter(requested).map((m) => (m.data as { approval: { approval_id: string } }).approval.approval_id),
    ).toEqual([asked.body.approval_id]);
    expect(
      cp.published.filter(
        (m) =>
          m.subject === 'svc.appr-a.policies.violation' &&
          (m.data as { denied_action: string }).denied_action === 'tool:shell',
      ),
    ).toEqual([]);
  });
});

describe('approvals a proxy holds a call for', () => {
  const ask = (tenant: string, body: Record<string, unknown>) =>
    cp.messaging.requests.request(`svc.${tenant}.approvals.request`, body, 2_000);
  const request = (approvalId: string) => ({
    tenant_id: 'appr-a',
    approval_id: approvalId,
    requested_by: { type: 'proxy', id: 'proxy:host-1' },
    action: 'llm:gpt-4o',
    context: { model: 'gpt-4o', workflow_id: 'wf-proxy' },
    envelope_id: 'env-held-1',
    policy_id: 'p-held',
    rule_id: 'r-held',
    reason: 'gpt-4o needs a human',
  });

  it('refuses to open an approval whose context or requester is past what one keeps, naming it, and stores nothing', async () => {
    const id = '01a20000-0000-7000-8000-00000000a0c1';
    const oversized = [
      ['context', { context: { tool_args: 'x'.repeat(MAX_HELD_CONTEXT_BYTES) } }],
      ['requested_by.id', { requested_by: { type: 'proxy', id: `proxy:${'h'.repeat(3_000)}` } }],
    ] as const;
    for (const [field, fields] of oversized)
      await expect(ask('appr-a', { ...request(id), ...fields })).rejects.toMatchObject({
        code: 'SVC-SYS-9002',
        message: expect.stringContaining(`${field}: `),
      });
    expect((await cp.call('GET', `/v1/approvals/${id}`, { key })).status).toBe(404);
  });

  it('opens the approval under the id the proxy chose, once however often it asks', async () => {
    const id = '01a20000-0000-7000-8000-00000000a001';
    const pending = { tenant_id: 'appr-a', approval_id: id, status: 'PENDING', reviewer_id: null, review_note: null };
    expect(await ask('appr-a', request(id))).toEqual(pending);
    expect(await ask('appr-a', request(id))).toEqual(pending);
    const stored = await cp.call('GET', `/v1/approvals/${id}`, { key });
    expect(stored.body).toMatchObject({
      approval_id: id,
      status: 'PENDING',
      action: 'llm:gpt-4o',
      envelope_id: 'env-held-1',
      workflow_id: 'wf-proxy',
      requested_by: { type: 'proxy', id: 'proxy:host-1' },
      policy_id: 'p-held',
      rule_id: 'r-held',
      reason: 'gpt-4o needs a human',
    });
    const listed = await cp.call('GET', '/v1/approvals?workflowId=wf-proxy', { key });
    expect(listed.body.map((a: { approval_id: string }) => a.approval_id)).toEqual([id]);
    const requestedOf = (approvalId: string) =>
      cp.published.filter(
        (m) =>
          m.subject === 'svc.appr-a.policies.approval.requested' &&
          (m.data as { approval: { approval_id: string } }).approval.approval_id === approvalId,
      );
    // The outbox publishes after the commit, in order: once a later approval's event is out, a
    // second event for the first would be out too.
    const later = '01a20000-0000-7000-8000-00000000a0f1';
    await ask('appr-a', request(later));
    await eventually(
      () => requestedOf(later).length,
      (n) => n === 1,
    );
    expect(requestedOf(id)).toHaveLength(1);
  });

  it('signals the decision to the proxies, and answers a later ask with it', async () => {
    const id = '01a20000-0000-7000-8000-00000000a002';
    await ask('appr-a', request(id));
    const signals: unknown[] = [];
    const subscription = await cp.messaging.signals.subscribeSignals('svc.appr-a.signals.approval', (data) => {
      signals.push(data);
    });
    const decided = await cp.call('PATCH', `/v1/approvals/${id}`, {
      key,
      body: { status: 'REJECTED', review_note: 'no' },
    });
    expect(decided.status).toBe(200);
    const standing = {
      tenant_id: 'appr-a',
      approval_id: id,
      status: 'REJECTED',
      reviewer_id: keyId,
      review_note: 'no',
    };
    await eventually(
      () => signals.length,
      (n) => n === 1,
    );
    expect(signals).toEqual([standing]);
    expect(await ask('appr-a', request(id))).toEqual(standing);
    await subscription.unsubscribe();
  });

  it("rejects a pending approval in the proxy's name once its held call ended, and leaves a decided one as it is", async () => {
    const id = '01a20000-0000-7000-8000-00000000a004';
    await ask('appr-a', request(id));
    const withdrawn = { ...request(id), withdrawn: 'the held call was cancelled' };
    const rejected = {
      tenant_id: 'appr-a',
      approval_id: id,
      status: 'REJECTED',
      reviewer_id: 'proxy:host-1',
      review_note: 'withdrawn: the held call was cancelled',
    };
    expect(await ask('appr-a', withdrawn)).toEqual(rejected);
    expect(await ask('appr-a', withdrawn)).toEqual(rejected);
    const audit = await cp.call('GET', '/v1/audit?resource_type=approval', { key });
    const withdrawals = (audit.body as { action: string; resource: { id: string } }[]).filter(
      (entry) => entry.action === 'approval.withdraw' && entry.resource.id === id,
    );
    expect(withdrawals).toEqual([
      expect.objectContaining({ actor: { type: 'proxy', id: 'proxy:host-1' }, result: 'rejected' }),
    ]);

    // Decided before the proxy's word arrived: the decision stands.
    const decidedId = '01a20000-0000-7000-8000-00000000a005';
    await ask('appr-a', request(decidedId));
    await cp.call('PATCH', `/v1/approvals/${decidedId}`, {
      key: reviewerKey,
      body: { status: 'APPROVED', reviewer_id: 'alice' },
    });
    expect(await ask('appr-a', { ...request(decidedId), withdrawn: 'late' })).toMatchObject({ status: 'APPROVED' });

    // Withdrawn before its open arrived: stored rejected, so the late open opens nothing.
    const lateId = '01a20000-0000-7000-8000-00000000a006';
    expect(await ask('appr-a', { ...request(lateId), withdrawn: 'gone early' })).toMatchObject({ status: 'REJECTED' });
    expect(await ask('appr-a', request(lateId))).toMatchObject({ status: 'REJECTED' });
  });

  it('lets only the proxy that opened an approval withdraw it: not another sidecar, not one asked over REST', async () => {
    const id = '01a20000-0000-7000-8000-00000000a007';
    await ask('appr-a', request(id));
    const other = { ...request(id), requested_by: { type: 'proxy', id: 'proxy:host-2' }, withdrawn: 'not mine' };
    expect(await ask('appr-a', other)).toMatchObject({ status: 'PENDING' });
    const asked = await pendingFromEvaluation();
    expect(await ask('appr-a', { ...request(asked), withdrawn: 'guessed' })).toMatchObject({ status: 'PENDING' });
    expect((await cp.call('GET', `/v1/approvals/${asked}`, { key })).body).toMatchObject({ status: 'PENDING' });
    expect(await ask('appr-a', { ...request(id), withdrawn: 'mine' })).toMatchObject({ status: 'REJECTED' });
  });

  it("refuses a body naming another tenant than the subject's, and a malformed one, storing nothing", async () => {
    const id = '01a20000-0000-7000-8000-00000000a003';
    await expect(ask('appr-b', request(id))).rejects.toMatchObject({ code: 'SVC-SYS-9004' });
    await expect(ask('appr-a', { ...request(id), action: '' })).rejects.toMatchObject({ code: 'SVC-SYS-9002' });
    expectSvcError(await cp.call('GET', `/v1/approvals/${id}`, { key }), 404, 'SVC-POL-2005');
  });
});
