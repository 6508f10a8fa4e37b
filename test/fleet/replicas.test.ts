import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { eventually } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { createTestDatabase, postgresReachable, type TestDatabase } from '../harness/postgres.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  proxyCa,
  proxyProcess,
  removeDirs,
  seedFleetTenant,
  type ControlPlaneProcess,
  type FleetTenant,
  type ProxyProcess,
  type RestAnswer,
} from '../harness/processes.ts';
import { startSimulator, type Simulator } from '../simulator/server.ts';
import { chat } from './agent-calls.ts';

/**
 * Three control-plane processes on one PostgreSQL database and one nats-server, four proxies of two
 * tenants, governed calls and REST writes spread over the replicas while one replica is killed
 * (SIGKILL) and another restarted (SIGTERM, start). Afterwards every answered call is counted
 * once, spend is within the documented bound, the audit chains verify, and a policy made on one
 * replica is enforced by every proxy.
 */
const available = await postgresReachable();

const MODEL = 'gpt-4o';
const MAX_TOKENS = 100;
const LOAD_MS = 18_000;
/** How long past LOAD_MS the agents of the tight tenant may go on to meet their spent budget. */
const SPEND_DOWN_GRACE_MS = 45_000;
/**
 * The control planes' lease time to live. A grant whose answer died with the killed replica stays
 * leased out until it expires; a short one returns it within the spend-down.
 */
const LEASE_TTL_SECONDS = 5;
/**
 * How long an agent must be refused by the budget without a call served in between to count it
 * spent: a proxy's empty lease refuses until its renewal brings what the control plane still holds,
 * and a stranded grant is back only after its time to live and the next renewal (at 80 % of it).
 */
const SPENT_DOWN_MS = LEASE_TTL_SECONDS * 2000;
/** Refusals that say the budget is spent: an empty lease, or the executions it ended. */
const BUDGET_REFUSALS = new Set(['422 SVC-BUD-3001', '409 SVC-ENV-1003']);
/** Tenant `tight` spends its budget down; tenant `ample` never reaches its limit. */
const TIGHT_LIMIT_USD = 0.05;
/** Each proxy's lease slice. */
const LEASE_USD = TIGHT_LIMIT_USD / 5;
const AMPLE_LIMIT_USD = 100;
const PROXIES_PER_TENANT = 2;
const WORKERS_PER_PROXY = 2;
const prices = loadPriceTable();

describe.skipIf(!available)('three control planes on one PostgreSQL', () => {
  let database: TestDatabase;
  let nats: NatsServer;
  let sim: Simulator;
  const caDir = mkdtempSync(join(tmpdir(), 'replicas-ca-'));
  const planes: ControlPlaneProcess[] = [];
  const proxies = new Map<string, ProxyProcess[]>();
  const tenants = new Map<string, FleetTenant>();

  beforeAll(async () => {
    database = await createTestDatabase();
    nats = await startNatsServer();
    sim = await startSimulator();
    for (let i = 0; i < 3; i++) {
      planes.push(
        await controlPlaneProcess(
          nats.url,
          {
            SVC_DATABASE_URL: database.url,
            SVC_DATABASE_POOL_SIZE: '4',
            SVC_JOB_LEASE_TTL_SECONDS: '3',
            SVC_LEASE_TTL_SECONDS: String(LEASE_TTL_SECONDS),
            SVC_SHUTDOWN_GRACE_MS: '5000',
          },
          // Three start at once on a machine that may be busy.
          { startTimeoutMs: 60_000 },
        ),
      );
    }
    // Together: the schema is migrated once, under the advisory lock, whichever comes first.
    await Promise.all(planes.map((p) => p.start()));
    tenants.set('tight', await seedFleetTenant(planes[0]!, 'tight', { max_cost_usd: TIGHT_LIMIT_USD }));
    tenants.set('ample', await seedFleetTenant(planes[1]!, 'ample', { max_cost_usd: AMPLE_LIMIT_USD }));
    const ca = await proxyCa(caDir);
    for (const [id, tenant] of tenants) {
      const started: ProxyProcess[] = [];
      for (let i = 0; i < PROXIES_PER_TENANT; i++) {
        started.push(
          await proxyProcess({
            natsUrl: nats.url,
            tenant,
            ca,
            openAiUpstream: sim.url,
            // As in the shared-budget suite: slices of a fifth, no soft limit, so the lease bound alone holds.
            env: { SVC_PROXY_LEASE_USD: String(LEASE_USD), SVC_PROXY_SOFT_LIMIT_USD: '0' },
          }),
        );
      }
      proxies.set(id, started);
    }
    await Promise.all([...proxies.values()].flat().map((p) => p.start()));
  }, 120_000);

  afterAll(async () => {
    await killAllProcesses();
    await sim?.close();
    await nats?.dispose();
    await database?.drop();
    await removeDirs([caDir, ...planes.map((p) => p.dataDir), ...[...proxies.values()].flat().map((p) => p.dataDir)]);
  });

  /** A REST call as the administrator on the first replica that answers (the others may be down). */
  async function rest(
    method: string,
    path: string,
    options: { tenant?: string; body?: unknown },
    from = 0,
  ): Promise<RestAnswer> {
    for (let attempt = 0; ; attempt++) {
      const plane = planes[(from + attempt) % planes.length]!;
      const answer = plane.running ? await plane.rest(method, path, options).catch(() => null) : null;
      if (answer !== null && answer.status !== 503) return answer;
      if (attempt > 30) throw new Error(`${method} ${path}: no replica answered`);
      await sleep(100);
    }
  }

  /**
   * Governed calls through one proxy until `until`; counts what the agent saw answered. An agent
   * of a tenant that must spend its budget down goes on, past `until` if the loaded machine made
   * it slow, until the spent budget has refused it for SPENT_DOWN_MS.
   */
  async function agent(proxy: ProxyProcess, execution: string, until: number, spendDown: boolean) {
    let served = 0;
    /** Since when every call was refused by the budget (null while calls are served). */
    let refusedSince: number | null = null;
    const spent = () => refusedSince !== null && Date.now() - refusedSince >= SPENT_DOWN_MS;
    const refusals = new Map<string, number>();
    const overtime = until + SPEND_DOWN_GRACE_MS;
    while (Date.now() < until || (spendDown && !spent() && Date.now() < overtime)) {
      const outcome = await chat(proxy, MODEL, {
        maxTokens: MAX_TOKENS,
        headers: { 'x-sim-input-tokens': '1', 'X-Svc-Execution-Id': execution },
      });
      if (outcome.status === 200) {
        served++;
        refusedSince = null;
      } else {
        const key = `${outcome.status} ${outcome.code}`;
        refusals.set(key, (refusals.get(key) ?? 0) + 1);
        if (BUDGET_REFUSALS.has(key)) refusedSince ??= Date.now();
        await sleep(100);
      }
    }
    return { served, refusals };
  }

  /**
   * Usage events written over REST, each to the next replica; one that is not answered (the
   * replica died under it) is sent again, with the same event id, to another.
   */
  async function restWriter(tenant: FleetTenant, budgetId: string, until: number) {
    const answered = new Map<string, string[]>();
    for (let n = 0; Date.now() < until; n++) {
      const envelope = await rest(
        'POST',
        '/v1/envelopes',
        { tenant: tenant.tenantId, body: { budget_id: budgetId, adapter_type: 'custom' } },
        n,
      );
      expect(envelope.status, JSON.stringify(envelope.body)).toBe(201);
      const envelopeId = String(envelope.body.envelope_id);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const eventId = randomUUID();
        const body = {
          event_id: eventId,
          event_type: 'llm.call',
          timestamp: new Date().toISOString(),
          cost_usd: 0.001,
        };
        const res = await rest('POST', `/v1/envelopes/${envelopeId}/events`, { tenant: tenant.tenantId, body }, n + i);
        expect(res.status, JSON.stringify(res.body)).toBe(202);
        ids.push(eventId);
      }
      answered.set(envelopeId, ids);
    }
    return answered;
  }

  it('counts every answered call once, holds every budget, keeps the audit chains, and enforces a policy everywhere', async () => {
    const ample = tenants.get('ample')!;
    const restBudget = await rest('POST', '/v1/budgets', {
      tenant: ample.tenantId,
      body: { name: 'rest-writes', type: 'cost', limits: { max_cost_usd: AMPLE_LIMIT_USD } },
    });
    expect(restBudget.status).toBe(201);
    const restBudgetId = String(restBudget.body.budget_id);

    const started = Date.now();
    const until = started + LOAD_MS;
    const agents = [...proxies.entries()].flatMap(([id, list]) =>
      list.flatMap((proxy, p) =>
        Array.from({ length: WORKERS_PER_PROXY }, (_, w) =>
          agent(proxy, `${id}-${p}-${w}`, until, id === 'tight').then((r) => ({ tenant: id, ...r })),
        ),
      ),
    );
    const writes = restWriter(ample, restBudgetId, until);
    const chaos = (async () => {
      await sleep(LOAD_MS / 3);
      await planes[1]!.kill();
      await sleep(LOAD_MS / 3);
      await planes[2]!.restart();
    })();
    const [results, answeredWrites] = await Promise.all([Promise.all(agents), writes, chaos]);
    const restWrites = [...answeredWrites.values()].reduce((n, ids) => n + ids.length, 0);

    const servedBy = (tenant: string) => results.filter((r) => r.tenant === tenant).reduce((n, r) => n + r.served, 0);
    const refusals = new Map<string, number>();
    for (const r of results) for (const [k, n] of r.refusals) refusals.set(k, (refusals.get(k) ?? 0) + n);
    // Refused by the spent budget (an empty lease, or the executions it ended), or failed closed
    // while a lease request was lost with the replica that was killed under it.
    const expected = new Set([...BUDGET_REFUSALS, '503 SVC-SYS-9001']);
    expect([...refusals.keys()].filter((r) => !expected.has(r))).toEqual([]);

    /** Once the processors have taken and acknowledged everything in the stream, nothing more will be counted. */
    const settled = async () => {
      const nc = await connect({ servers: nats.url });
      try {
        const jsm = await nc.jetstreamManager();
        await eventually(
          () => jsm.consumers.info('SVC_EVENTS', 'event-processor'),
          (info) => info.num_pending === 0 && info.num_ack_pending === 0,
          60_000,
        );
      } finally {
        await nc.close();
      }
    };
    const usageOf = async (tenant: FleetTenant, budgetId: string, calls: number) => {
      await eventually(
        () => rest('GET', `/v1/budgets/${budgetId}/usage`, { tenant: tenant.tenantId }),
        // A batch pulled by the killed replica comes back after the ack wait (30 s).
        (r) => (r.body as { llm_calls: number }).llm_calls >= calls,
        60_000,
      );
      await settled();
      const usage = await rest('GET', `/v1/budgets/${budgetId}/usage`, { tenant: tenant.tenantId });
      return usage.body as { llm_calls: number; cost_usd: number };
    };

    const figures: Record<string, unknown>[] = [];
    const oneCallEstimateUsd = cost(prices, MODEL, { input: 20, output: MAX_TOKENS, cachedInput: 0 }).costUsd;
    for (const [id, tenant] of tenants) {
      const served = servedBy(id);
      const usage = await usageOf(tenant, tenant.budgetId, served);
      const limit = id === 'tight' ? TIGHT_LIMIT_USD : AMPLE_LIMIT_USD;
      const bound = limit + PROXIES_PER_TENANT * oneCallEstimateUsd;
      figures.push({
        budget: `${id} (proxies)`,
        calls: served,
        events: usage.llm_calls,
        duplicates: Math.max(0, usage.llm_calls - served),
        lost: Math.max(0, served - usage.llm_calls),
        spent_usd: usage.cost_usd,
        limit_usd: limit,
        bound_usd: Number(bound.toFixed(6)),
      });
      expect(usage.llm_calls, `${id}: events recorded vs calls answered`).toBe(served);
      expect(usage.cost_usd).toBeLessThanOrEqual(bound);
    }
    const restUsage = await usageOf(ample, restBudgetId, restWrites);
    figures.push({
      budget: 'ample (REST)',
      calls: restWrites,
      events: restUsage.llm_calls,
      duplicates: Math.max(0, restUsage.llm_calls - restWrites),
      lost: Math.max(0, restWrites - restUsage.llm_calls),
      spent_usd: restUsage.cost_usd,
      limit_usd: AMPLE_LIMIT_USD,
    });
    expect(restUsage.llm_calls).toBe(restWrites);
    for (const [envelopeId, ids] of answeredWrites) {
      const events = await rest('GET', `/v1/events?envelope_id=${envelopeId}&limit=1000`, { tenant: ample.tenantId });
      expect((events.body as { event_id: string }[]).map((e) => e.event_id).sort()).toEqual([...ids].sort());
    }
    // The tight budget was spent down, and every call the simulator answered was seen by an agent.
    // Short of its limit only by what each proxy's lease kept (less than a call): a renewal whose
    // answer died with the killed replica is sent again with the same report, counted once.
    expect(figures[0]!.spent_usd as number).toBeGreaterThan(TIGHT_LIMIT_USD - PROXIES_PER_TENANT * oneCallEstimateUsd);
    const answeredBySim = sim.requests.filter((r) => r.path === '/v1/chat/completions' && r.status === 200).length;
    expect(answeredBySim).toBe(servedBy('tight') + servedBy('ample'));

    for (const tenant of tenants.values()) {
      const verified = await rest('GET', '/v1/audit/verify', { tenant: tenant.tenantId });
      expect(verified.body, tenant.tenantId).toMatchObject({ valid: true });
    }

    // A policy made on the restarted replica reaches every proxy, through whichever replica publishes.
    for (const tenant of tenants.values()) {
      const created = await planes[2]!.rest('POST', '/v1/policies', {
        tenant: tenant.tenantId,
        body: { name: 'no-mini', rules: [{ action: 'llm:gpt-4o-mini', effect: 'deny' }], priority: 500 },
      });
      expect(created.status).toBe(201);
    }
    for (const proxy of [...proxies.values()].flat()) {
      await eventually(
        () => chat(proxy, 'gpt-4o-mini'),
        (outcome) => outcome.status === 403 && outcome.code === 'SVC-POL-2001',
        10_000,
      );
    }

    console.log(
      `fleet of 3 control planes (one killed, one restarted) on PostgreSQL, ${proxies.size * PROXIES_PER_TENANT} proxies, ${Math.round((Date.now() - started) / 1000)} s:`,
    );
    console.table(figures);
    console.log('refusals:', Object.fromEntries(refusals));
  }, 210_000);
});
