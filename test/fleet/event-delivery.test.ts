import { beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { metricValue, type FleetTenant, type ProxyProcess } from '../harness/processes.ts';
import { chat } from './agent-calls.ts';

const MODELS = ['gpt-4o-mini', 'gpt-4o'];
const prices = loadPriceTable();
const fleet = useFleet({ tenants: { meter: { max_cost_usd: 100, max_tokens: 10_000_000 } } });
let proxy: ProxyProcess;
let tenant: FleetTenant;
/** Calls the agents saw answered, counted on the client side. */
let served = 0;

beforeAll(async () => {
  tenant = fleet.tenant('meter');
  proxy = await fleet.proxy(tenant);
  await proxy.start();
}, 60_000);

/** Call number `i`: sizes vary so that a lost or doubled call shows in every total. */
async function meteredCall(i: number): Promise<void> {
  const outcome = await chat(proxy, MODELS[i % MODELS.length]!, {
    maxTokens: 3 + (i % 7),
    headers: { 'x-sim-input-tokens': String(40 + 13 * i) },
  });
  expect(outcome, `call ${i}`).toEqual({ status: 200, code: null });
  served++;
}

/** What the simulator reported for every answered chat call: the truth the control plane must match. */
function simulatorTotals(): { input: number; output: number; costUsd: number; calls: number } {
  const sum = { input: 0, output: 0, costUsd: 0, calls: 0 };
  for (const r of fleet.sim.requests) {
    if (r.path !== '/v1/chat/completions' || r.status !== 200 || r.usageSent === undefined) continue;
    sum.input += r.usageSent.input;
    sum.output += r.usageSent.output;
    sum.costUsd += cost(prices, String((r.json as { model: string }).model), r.usageSent).costUsd;
    sum.calls++;
  }
  return sum;
}

async function controlPlaneTotals(): Promise<{ input: number; output: number; costUsd: number; calls: number }> {
  const res = await fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId });
  return {
    input: res.body.tokens_input,
    output: res.body.tokens_output,
    costUsd: res.body.cost_usd,
    calls: res.body.llm_calls,
  };
}

/** Waits until the control plane has applied every call, then checks nothing was counted twice. */
async function expectTotalsMatch(expectedCalls: number): Promise<void> {
  const truth = simulatorTotals();
  expect(truth.calls).toBe(expectedCalls);
  const applied = await eventually(controlPlaneTotals, (t) => t.calls >= truth.calls, 20_000);
  // A moment more, so that a late duplicate would have been applied too.
  await new Promise((r) => setTimeout(r, 500));
  const settled = await controlPlaneTotals();
  expect(settled).toEqual(applied);
  expect({ input: settled.input, output: settled.output, calls: settled.calls }).toEqual({
    input: truth.input,
    output: truth.output,
    calls: truth.calls,
  });
  // Each event's cost is stored in whole micro-dollars: at most half a micro-dollar of rounding per call.
  expect(Math.abs(settled.costUsd - truth.costUsd)).toBeLessThanOrEqual(truth.calls * 0.5e-6 + 1e-9);
  expect(Math.round(settled.costUsd * 100)).toBe(Math.round(truth.costUsd * 100));
}

const outboxDepth = async () => metricValue(await proxy.metrics(), 'svc_proxy_outbox_depth') ?? -1;

describe('metered events between a proxy process and the control plane over NATS', () => {
  it('NATS killed in the middle of a run: the proxy keeps serving, buffers, replays; totals equal the simulator to the token and the cent', async () => {
    // Three agents call without pause while NATS is killed under them and brought back.
    let running = true;
    const agent = async (first: number) => {
      for (let i = first; running; i += 3) await meteredCall(i);
    };
    const agents = [agent(0), agent(1), agent(2)];
    const after = (calls: number) =>
      eventually(
        () => served,
        (d) => d >= calls,
        20_000,
      );
    await after(8);
    await fleet.nats.kill();
    await after(served + 12);
    expect(await outboxDepth()).toBeGreaterThan(0);
    await fleet.nats.restart();
    await after(served + 8);
    running = false;
    await Promise.all(agents);
    await expectTotalsMatch(served);
    await eventually(outboxDepth, (d) => d === 0, 10_000);
  }, 60_000);

  it('the proxy process killed with SIGKILL while events are buffered, restarted: nothing lost, nothing counted twice', async () => {
    await fleet.nats.stop();
    for (let i = 100; i < 110; i++) await meteredCall(i);
    expect(await outboxDepth()).toBeGreaterThanOrEqual(10);
    await proxy.kill();
    await fleet.nats.restart();
    await proxy.start();
    await expectTotalsMatch(served);
    // The restarted proxy serves and meters as before.
    for (let i = 200; i < 203; i++) await meteredCall(i);
    await expectTotalsMatch(served);
  }, 60_000);
});
