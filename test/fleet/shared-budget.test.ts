import { beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { type FleetTenant, type ProxyProcess } from '../harness/processes.ts';
import { chat } from './agent-calls.ts';

const PROXIES = 4;
const WORKERS_PER_PROXY = 3;
const LIMIT_USD = 0.05;
const MODEL = 'gpt-4o';
const MAX_TOKENS = 100;
const prices = loadPriceTable();

const fleet = useFleet({ tenants: { shared: { max_cost_usd: LIMIT_USD, max_tokens: 10_000_000 } } });
let tenant: FleetTenant;
const proxies: ProxyProcess[] = [];

beforeAll(async () => {
  tenant = fleet.tenant('shared');
  // Slices of a fifth of the budget, so the proxies keep coming back for more; no soft limit, so
  // a slow lease answer on a busy machine cannot add spending beyond the leases (that fail-open
  // allowance is separate from the lease bound and documented with it).
  const env = {
    SVC_PROXY_LEASE_USD: String(LIMIT_USD / 5),
    SVC_PROXY_SOFT_LIMIT_USD: '0',
    SVC_PROXY_SOFT_LIMIT_TOKENS: '0',
  };
  for (let i = 0; i < PROXIES; i++) proxies.push(await fleet.proxy(tenant, env));
  await Promise.all(proxies.map((p) => p.start()));
}, 60_000);

/**
 * Calls through one proxy until it has refused for 1.5 s on end: its lease is spent and the
 * control plane has nothing left to lease (reported spend is held back only until its events
 * are applied, which takes milliseconds).
 */
async function worker(proxy: ProxyProcess, id: string): Promise<{ served: number; refusals: Set<string> }> {
  let served = 0;
  let refusedSince: number | null = null;
  const refusals = new Set<string>();
  while (refusedSince === null || Date.now() - refusedSince < 1500) {
    // The simulator reports 1 input token, fewer than the proxy's estimate of the prompt, and
    // exactly max_tokens of output: every call's actual cost is within its estimate.
    const outcome = await chat(proxy, MODEL, {
      maxTokens: MAX_TOKENS,
      headers: { 'x-sim-input-tokens': '1', 'X-Svc-Execution-Id': id },
    });
    if (outcome.status === 200) {
      served++;
      refusedSince = null;
    } else {
      refusals.add(`${outcome.status} ${outcome.code}`);
      refusedSince ??= Date.now();
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { served, refusals };
}

describe('four proxy processes spending one budget concurrently', () => {
  it('spend no more than the limit plus the documented in-flight bound', async () => {
    const results = await Promise.all(
      proxies.flatMap((p, i) => Array.from({ length: WORKERS_PER_PROXY }, (_, w) => worker(p, `shared-${i}-${w}`))),
    );
    const served = results.reduce((n, r) => n + r.served, 0);
    // Refused by an empty lease, or, once the control plane saw the budget exceeded, by the
    // termination of the executions on it.
    const refusals = new Set(results.flatMap((r) => [...r.refusals]));
    expect(refusals.has('422 SVC-BUD-3001')).toBe(true);
    expect([...refusals].filter((r) => r !== '422 SVC-BUD-3001' && r !== '409 SVC-ENV-1003')).toEqual([]);

    const answered = fleet.sim.requests.filter(
      (r) => r.path === '/v1/chat/completions' && r.status === 200 && r.usageSent !== undefined,
    );
    expect(answered.length).toBe(served);
    const truthUsd = answered.reduce((sum, r) => sum + cost(prices, MODEL, r.usageSent!).costUsd, 0);
    const usage = await eventually(
      () => fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId }),
      (r) => r.body.llm_calls === served,
      20_000,
    );
    const spentUsd = usage.body.cost_usd as number;
    expect(Math.abs(spentUsd - truthUsd)).toBeLessThan(1e-6 * served + 1e-9);

    // docs/budgets.md, "Leases": beyond the limit, at most one call's estimate per proxy (the
    // call that was admitted on the last of a lease and settled above its hold).
    const oneCallEstimateUsd = cost(prices, MODEL, { input: 20, output: MAX_TOKENS, cachedInput: 0 }).costUsd;
    expect(spentUsd).toBeLessThanOrEqual(LIMIT_USD + PROXIES * oneCallEstimateUsd);
    // And the budget really was spent down: what is left is less than one call per lease.
    expect(spentUsd).toBeGreaterThan(LIMIT_USD - PROXIES * oneCallEstimateUsd);
    // Every proxy took part.
    for (let i = 0; i < PROXIES; i++) {
      const ofProxy = results
        .slice(i * WORKERS_PER_PROXY, (i + 1) * WORKERS_PER_PROXY)
        .reduce((n, r) => n + r.served, 0);
      expect(ofProxy, `proxy ${i}`).toBeGreaterThan(0);
    }
  }, 50_000);
});
