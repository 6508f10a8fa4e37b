import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import type { FleetTenant, ProxyProcess } from '../harness/processes.ts';
import { chat } from './agent-calls.ts';

const fleet = useFleet({ tenants: { claims: { max_cost_usd: 100, max_tokens: 10_000_000 } } });
let tenant: FleetTenant;
/** A sidecar of another team: bound to another budget of the same tenant. */
let stranger: ProxyProcess;
/** A sidecar bound to the tenant's budget, on which the envelope is made. */
let own: ProxyProcess;
let envelopeId: string;

beforeAll(async () => {
  tenant = fleet.tenant('claims');
  const other = await fleet.cp.rest('POST', '/v1/budgets', {
    tenant: 'claims',
    body: { name: 'other team', type: 'cost', limits: { max_cost_usd: 100 } },
  });
  expect(other.status).toBe(201);
  stranger = await fleet.proxy(tenant, { SVC_BUDGET_ID: other.body.budget_id as string });
  const made = await fleet.cp.rest('POST', '/v1/envelopes', {
    tenant: 'claims',
    body: { budget_id: tenant.budgetId, adapter_type: 'custom' },
  });
  expect(made.status).toBe(201);
  envelopeId = made.body.envelope_id as string;
  own = await fleet.proxy(tenant);
  await Promise.all([stranger.start(), own.start()]);
}, 60_000);

interface EnvelopeView {
  state: string;
  termination_reason: string | null;
  cost_summary: { llm_calls: number; cost_usd: number };
}
const envelope = async () =>
  (await fleet.cp.rest('GET', `/v1/envelopes/${envelopeId}`, { tenant: 'claims' })).body as EnvelopeView;
const claims = (text: string, claim: string) =>
  Number(new RegExp(`svc_envelope_foreign_claims_total\\{claim="${claim}"\\} (\\d+)`).exec(text)?.[1] ?? 0);

describe('an envelope named through a sidecar of another budget', () => {
  it('is neither charged nor ended by that sidecar, whose own budget pays; its own sidecar still counts', async () => {
    const policy = await fleet.cp.rest('POST', '/v1/policies', {
      tenant: 'claims',
      body: {
        name: 'no-gpt-4o',
        enforcement: 'TERMINATE',
        rules: [{ action: 'llm:gpt-4o', effect: 'deny' }],
        priority: 500,
      },
    });
    expect(policy.status).toBe(201);
    const named = { headers: { 'X-Svc-Envelope-Id': envelopeId } };
    expect(await chat(stranger, 'gpt-4o-mini', named)).toEqual({ status: 200, code: null });
    // Served until the ruleset arrives; then the call is denied and the sidecar ends the envelope.
    await eventually(
      () => chat(stranger, 'gpt-4o', named),
      (answer) => answer.status === 403,
      10_000,
    );
    expect(await chat(stranger, 'gpt-4o-mini', named)).toMatchObject({ status: 409, code: 'SVC-ENV-1003' });
    const scraped = await eventually(
      () => fleet.cp.scrape(),
      (text) => claims(text, 'termination') === 1 && claims(text, 'usage') >= 1,
      10_000,
    );
    expect(claims(scraped, 'pause')).toBe(0);
    expect(await envelope()).toMatchObject({ state: 'AUTHORIZED', termination_reason: null });
    expect((await envelope()).cost_summary).toMatchObject({ llm_calls: 0, cost_usd: 0 });
    const spent = await fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: 'claims' });
    expect(spent.body).toMatchObject({ llm_calls: 0 });

    expect(await chat(own, 'gpt-4o-mini', named)).toEqual({ status: 200, code: null });
    const counted = await eventually(envelope, (e) => e.cost_summary.llm_calls === 1, 10_000);
    expect(counted).toMatchObject({ state: 'RUNNING' });
  }, 60_000);
});

describe('an execution id two teams chose alike', () => {
  it('is ended for the team whose envelope was terminated, and not for the other, after a restart too', async () => {
    const nightly = { headers: { 'X-Svc-Execution-Id': 'nightly-report' } };
    expect(await chat(own, 'gpt-4o-mini', nightly)).toEqual({ status: 200, code: null });
    expect(await chat(stranger, 'gpt-4o-mini', nightly)).toEqual({ status: 200, code: null });
    const listed = await eventually(
      async () =>
        (await fleet.cp.rest('GET', `/v1/envelopes?budget_id=${tenant.budgetId}`, { tenant: 'claims' })).body as {
          envelope_id: string;
          execution_id: string;
        }[],
      (list) => list.some((e) => e.execution_id === 'nightly-report'),
      10_000,
    );
    const ours = listed.find((e) => e.execution_id === 'nightly-report')!.envelope_id;
    const stopped = await fleet.cp.rest('POST', `/v1/envelopes/${ours}/terminate`, {
      tenant: 'claims',
      body: { reason: 'operator stop' },
    });
    expect(stopped.status).toBe(200);
    await eventually(
      () => chat(own, 'gpt-4o-mini', nightly),
      (answer) => answer.status === 409,
      10_000,
    );
    expect(await chat(stranger, 'gpt-4o-mini', nightly)).toEqual({ status: 200, code: null });
    // Met anew from the holds the control plane keeps: still not the other team's.
    await stranger.stop();
    await stranger.start();
    expect(await chat(stranger, 'gpt-4o-mini', nightly)).toEqual({ status: 200, code: null });
    await own.stop();
    await own.start();
    expect(await chat(own, 'gpt-4o-mini', nightly)).toMatchObject({ status: 409, code: 'SVC-ENV-1003' });
  }, 60_000);
});
