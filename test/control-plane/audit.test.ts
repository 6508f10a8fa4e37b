import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../control-plane/audit/canonical-json.ts';
import type { AuditRecord } from '../../core/domain/index.ts';
import {
  seedTenant,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
  type TenantResources,
} from '../harness/control-plane.ts';
import { rawAudit, type RawAudit } from '../storage/raw-audit.ts';

let cp: RunningControlPlane;
let key: string;
let keyId: string;
let seed: TenantResources;

const ROOT_ACTOR = { type: 'bootstrap', id: 'bootstrap-admin' };

async function audit(query = ''): Promise<AuditRecord[]> {
  const res = await cp.call('GET', `/v1/audit${query}`, { key });
  expect(res.status).toBe(200);
  return res.body as AuditRecord[];
}

beforeEach(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'acme');
  // A key is `svc_<id>_<secret>`; the id is what audit records name as the actor.
  keyId = key.split('_')[1]!;
  seed = await seedTenant(cp, key);
  await cp.call('POST', '/v1/policies/evaluate', { key, body: { action: 'tool:shell', context: {} } });
  await cp.call('POST', `/v1/envelopes/${seed.envelopeId}/terminate`, { key, body: { reason: 'done' } });
  await cp.call('DELETE', `/v1/api-keys/${seed.keyId}`, { key });
});
afterEach(async () => cp.close());

describe('every governance action leaves an audit record naming its actor', () => {
  it('records tenant, key, budget, policy, evaluation and envelope actions', async () => {
    const records = await audit('?limit=1000');
    const me = { type: 'api_key', id: keyId };
    const expected: Array<[string, { type: string; id: string }, string, string?]> = [
      ['tenant.create', ROOT_ACTOR, 'tenant', 'acme'],
      ['api_key.create', ROOT_ACTOR, 'api_key', keyId],
      ['budget.create', me, 'budget', seed.budgetId],
      ['policy.create', me, 'policy', seed.policyId],
      ['envelope.create', me, 'envelope', seed.envelopeId],
      ['api_key.create', me, 'api_key', seed.keyId],
      ['policy.evaluate', me, 'action', 'tool:shell'],
      ['envelope.terminate', me, 'envelope', seed.envelopeId],
      ['api_key.revoke', me, 'api_key', seed.keyId],
    ];
    for (const [action, actor, type, id] of expected) {
      const found = records.find((r) => r.action === action && r.resource.type === type && r.resource.id === id);
      expect(found, `${action} ${id}`).toBeDefined();
      expect(found!.actor, action).toEqual(actor);
      expect(found!.tenant_id).toBe('acme');
    }
    expect(records.find((r) => r.action === 'policy.evaluate' && r.resource.id === 'tool:shell')?.result).toBe('deny');
    // The policy check that authorized the envelope is on record too.
    expect(
      records.filter((r) => r.action === 'policy.evaluate' && r.resource.id === 'execution:start').map((r) => r.result),
    ).toEqual(['allow']);
  });

  it('records the decision that let an envelope through when the envelope itself is refused', async () => {
    const executionStarts = async () =>
      (await audit('?action=policy.evaluate&limit=1000')).filter((r) => r.resource.id === 'execution:start');
    const before = await executionStarts();
    const body = { budget_id: seed.budgetId, adapter_type: 'custom', execution_id: 'exec-taken' };
    expect((await cp.call('POST', '/v1/envelopes', { key, body })).status).toBe(201);
    const again = await cp.call('POST', '/v1/envelopes', { key, body });
    expect(again.status).toBe(409);
    // Decision and envelope commit together; the refused envelope's decision is written alone.
    expect((await executionStarts()).map((r) => r.result)).toEqual(['allow', 'allow', ...before.map((r) => r.result)]);
    expect((await audit('?action=envelope.create&limit=1000')).length).toBe(2);
    expect((await cp.call('GET', '/v1/audit/verify', { key })).body).toMatchObject({ valid: true });
  });

  it('filters by action, resource type and actor, newest first, up to the limit', async () => {
    const all = await audit('?limit=1000');
    expect(all.map((r) => r.seq)).toEqual([...all.map((r) => r.seq)].sort((a, b) => b - a));
    expect(all.at(-1)!.seq).toBe(1);

    const creates = await audit('?action=api_key.create');
    expect(creates.map((r) => r.resource.id)).toEqual([seed.keyId, keyId]);
    const policies = await audit('?resource_type=policy');
    expect(policies.map((r) => r.action)).toEqual(['policy.create']);
    expect((await audit('?resourceType=policy')).map((r) => r.audit_id)).toEqual(policies.map((r) => r.audit_id));
    const byRoot = await audit('?actor_id=bootstrap-admin');
    expect(byRoot.map((r) => r.action)).toEqual(['api_key.create', 'tenant.create']);
    const mine = await audit(`?actor_id=${keyId}`);
    expect(mine.length + byRoot.length + all.filter((r) => r.actor.type === 'system').length).toBe(all.length);
    const latest = await audit('?limit=2');
    expect(latest).toEqual(all.slice(0, 2));
    expect(await audit('?action=no.such.action')).toEqual([]);
  });
});

describe('the hash chain', () => {
  const verify = async () =>
    (await cp.call('GET', '/v1/audit/verify', { key })).body as {
      valid: boolean;
      checked: number;
      first_invalid_seq: number | null;
      reason: string | null;
    };
  /** Changes the stored records while the control plane is down, as someone with the volume could. */
  const tamper = async (change: (raw: RawAudit) => Promise<void>) => {
    const { databaseUrl } = cp;
    cp = await cp.restart(async (dataDir) => {
      const raw = await rawAudit({ dataDir, databaseUrl });
      try {
        await change(raw);
      } finally {
        await raw.close();
      }
    });
  };

  it('verifies an untouched log', async () => {
    const count = (await audit('?limit=1000')).length;
    expect(await verify()).toEqual({ valid: true, checked: count, first_invalid_seq: null, reason: null });
  });

  it('stays one unbroken chain under concurrent writes', async () => {
    const before = (await audit('?limit=1'))[0]!.seq;
    const writes = Array.from({ length: 20 }, (_, i) =>
      i % 2 === 0
        ? cp.call('POST', '/v1/budgets', { key, body: { name: `b${i}`, type: 'cost', limits: { max_cost_usd: 1 } } })
        : cp.call('POST', '/v1/policies/evaluate', { key, body: { action: `tool:t${i}`, context: {} } }),
    );
    expect((await Promise.all(writes)).map((r) => r.status)).toEqual(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? 201 : 200)),
    );
    const seqs = (await audit('?limit=1000')).map((r) => r.seq);
    expect(seqs).toEqual(Array.from({ length: before + 20 }, (_, i) => before + 20 - i));
    expect(await verify()).toEqual({ valid: true, checked: before + 20, first_invalid_seq: null, reason: null });
  });

  it('verifies the chain as valid while other requests append to it', async () => {
    let writing = true;
    const writer = (async () => {
      while (writing) {
        const body = { name: 'b', type: 'token', limits: { max_tokens: 10 } };
        await Promise.all([1, 2, 3, 4].map(() => cp.call('POST', '/v1/budgets', { key, body })));
      }
    })();
    const answers = [];
    try {
      for (let i = 0; i < 40; i++) answers.push(await verify());
    } finally {
      writing = false;
      await writer;
    }
    expect(answers.filter((answer) => !answer.valid)).toEqual([]);
    // Each answer covers the chain as far as its head was when it began.
    expect(answers.at(-1)!.checked).toBeGreaterThan(answers[0]!.checked);
  });

  it('reports the seq of a record altered in storage', async () => {
    await tamper(async (raw) => raw.put('acme', 4, { ...(await raw.get('acme', 4)), result: 'deny' }));
    expect(await verify()).toMatchObject({ valid: false, first_invalid_seq: 4, checked: 3 });
  });

  it('reports the next record when an altered record is re-hashed to hide it', async () => {
    await tamper(async (raw) => {
      const { hash: _old, ...body } = {
        ...(await raw.get('acme', 3)),
        actor: { type: 'api_key' as const, id: 'someone-else' },
      };
      await raw.put('acme', 3, { ...body, hash: createHash('sha256').update(canonicalJson(body)).digest('hex') });
    });
    expect(await verify()).toMatchObject({ valid: false, first_invalid_seq: 4 });
  });

  it('reports the last record when it is re-hashed to hide a change', async () => {
    const last = (await audit('?limit=1'))[0]!;
    await tamper(async (raw) => {
      const { hash: _old, ...body } = { ...(await raw.get('acme', last.seq)), result: 'deny' };
      await raw.put('acme', last.seq, {
        ...body,
        hash: createHash('sha256').update(canonicalJson(body)).digest('hex'),
      });
    });
    expect(await verify()).toMatchObject({ valid: false, first_invalid_seq: last.seq, checked: last.seq });
  });

  it('reports records removed from the end', async () => {
    const all = await audit('?limit=1000');
    await tamper((raw) => raw.remove('acme', all[0]!.seq));
    expect(await verify()).toMatchObject({ valid: false, first_invalid_seq: all[0]!.seq });
  });
});
