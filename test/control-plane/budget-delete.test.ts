import { status } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { BUCKETS, keys, LeaseGrantSchema, syncSubjects } from '../../core/sync/contract.ts';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { clientsFor, failure, statusDetails, unary, type Clients } from '../harness/grpc.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

/** DELETE /v1/budgets/{budget_id} (CostService.DeleteBudget) on a control plane with a real nats-server. */
let nats: NatsServer;
let cp: RunningControlPlane;
let clients: Clients;
let key: string;

beforeAll(async () => {
  nats = await startNatsServer();
  cp = await startControlPlane({}, undefined, () =>
    openNatsMessaging({ connection: { servers: nats.url, name: 'budget-delete' } }, pino({ level: 'silent' })),
  );
  key = await tenantWithKey(cp, 'acme');
  clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(cp.plane.grpcPort())}`);
}, 30_000);

afterAll(async () => {
  clients.close();
  await cp.close();
  await nats.dispose();
});

async function budget(name: string): Promise<string> {
  const res = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name, type: 'cost', limits: { max_cost_usd: 5 } },
  });
  expect(res.status).toBe(201);
  return res.body.budget_id as string;
}

async function budgetState(budgetId: string) {
  const bucket = await cp.messaging.keyValue.open(BUCKETS.budgets);
  return bucket.get(keys.budget('acme', budgetId));
}

function lease(budgetId: string) {
  return cp.messaging.requests.request(
    syncSubjects.lease('acme'),
    { tenant_id: 'acme', budget_id: budgetId, holder: 'pod-a', want_tokens: 0, want_micros: 1_000_000 },
    2_000,
  );
}

describe('deleting a budget', () => {
  it('is refused while an envelope on it has not ended, then deletes it, audits and announces it', async () => {
    const budgetId = await budget('to-delete');
    await eventually(
      () => budgetState(budgetId),
      (s) => s !== undefined,
    );
    const env = await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } });
    expect(env.status).toBe(201);

    const refused = expectSvcError(await cp.call('DELETE', `/v1/budgets/${budgetId}`, { key }), 409, 'SVC-BUD-3006');
    expect(refused.details).toMatchObject({ budget_id: budgetId, live_envelopes: true, leased: false });
    expect((await cp.call('GET', `/v1/budgets/${budgetId}`, { key })).status).toBe(200);

    await cp.call('POST', `/v1/envelopes/${String(env.body.envelope_id)}/terminate`, { key, body: { reason: 'done' } });
    const deleted = await cp.call('DELETE', `/v1/budgets/${budgetId}`, { key });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({});

    expectSvcError(await cp.call('GET', `/v1/budgets/${budgetId}`, { key }), 404, 'SVC-BUD-3002');
    expectSvcError(await cp.call('DELETE', `/v1/budgets/${budgetId}`, { key }), 404, 'SVC-BUD-3002');
    const listed = (await cp.call('GET', '/v1/budgets', { key })).body as Array<{ budget_id: string }>;
    expect(listed.map((b) => b.budget_id)).not.toContain(budgetId);
    // The envelope that ran on it keeps its record and the budget id it was charged to.
    const ended = await cp.call('GET', `/v1/envelopes/${String(env.body.envelope_id)}`, { key });
    expect(ended.body).toMatchObject({ budget_id: budgetId, state: 'TERMINATED' });
    // A new envelope on it is refused.
    expectSvcError(
      await cp.call('POST', '/v1/envelopes', { key, body: { budget_id: budgetId, adapter_type: 'custom' } }),
      422,
      'SVC-BUD-3005',
    );

    const audit = (await cp.call('GET', '/v1/audit?action=budget.delete', { key })).body as Array<{
      resource: { id: string };
      result: string;
      metadata: Record<string, unknown>;
    }>;
    expect(audit.find((a) => a.resource.id === budgetId)).toMatchObject({
      result: 'deleted',
      metadata: { name: 'to-delete' },
    });
    const announced = await eventually(
      () => cp.published.find((m) => m.subject === subjects.budgetDeleted('acme')),
      (m) => m !== undefined,
    );
    expect(announced?.data).toMatchObject({ tenant_id: 'acme', budget_id: budgetId, budget_name: 'to-delete' });
    // The proxies' copy of its state leaves the bucket.
    await eventually(
      () => budgetState(budgetId),
      (s) => s === undefined,
    );
  });

  it('is refused while a proxy holds a lease of it; afterwards a lease of it is refused (fail closed)', async () => {
    const budgetId = await budget('leased');
    const { lease_id, micros } = LeaseGrantSchema.parse(await lease(budgetId));
    expect(micros).toBe(1_000_000);
    const refused = expectSvcError(await cp.call('DELETE', `/v1/budgets/${budgetId}`, { key }), 409, 'SVC-BUD-3006');
    expect(refused.details).toMatchObject({ live_envelopes: false, leased: true });

    await cp.messaging.requests.request(
      syncSubjects.lease('acme'),
      {
        tenant_id: 'acme',
        budget_id: budgetId,
        holder: 'pod-a',
        lease_id,
        want_tokens: 0,
        want_micros: 0,
        release: true,
      },
      2_000,
    );
    expect((await cp.call('DELETE', `/v1/budgets/${budgetId}`, { key })).status).toBe(200);
    await expect(lease(budgetId)).rejects.toMatchObject({ code: 'SVC-BUD-3002' });
  });

  it('over gRPC: CostService.DeleteBudget deletes, needs budgets:write and names a missing budget', async () => {
    const costs = clients.client('svc.cost.v1.CostService');
    const budgetId = await budget('grpc');
    const reader = await tenantWithKey(cp, 'acme', ['budgets:read']);
    const denied = await failure(unary(costs, 'DeleteBudget', { budget_id: budgetId }, { key: reader }));
    expect(denied.code).toBe(status.PERMISSION_DENIED);

    expect(await unary(costs, 'DeleteBudget', { budget_id: budgetId }, { key })).toEqual({});
    const missing = await failure(unary(costs, 'DeleteBudget', { budget_id: budgetId }, { key }));
    expect(missing.code).toBe(status.NOT_FOUND);
    expect(statusDetails(missing).errorInfo?.reason).toBe('SVC-BUD-3002');
    const empty = await failure(unary(costs, 'DeleteBudget', {}, { key }));
    expect(empty.code).toBe(status.INVALID_ARGUMENT);
  });
});
