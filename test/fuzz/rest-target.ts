import { randomUUID } from 'node:crypto';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  FLEET_ROOT_KEY,
  killAllProcesses,
  removeDirs,
  type ControlPlaneProcess,
} from '../harness/processes.ts';

/** One HTTP request as a fuzz suite sends it: the body is raw text, sent as is. */
export interface RawRequest {
  method: string;
  /** Path and query, already encoded. */
  url: string;
  headers: Record<string, string>;
  body?: string;
}

export interface RawAnswer {
  status: number;
  contentType: string;
  text: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: unknown;
}

/** Resource ids of one tenant, made over REST before fuzzing so generated calls reach real ones. */
export interface TenantFixture {
  tenantId: string;
  /** The admin key the suite calls with; never revoked by the fuzzer (its id is in no pool). */
  adminKey: string;
  budgetIds: string[];
  policyIds: string[];
  envelopeIds: string[];
  /** Keys the fuzzer may revoke. */
  keyIds: string[];
}

export interface RestTarget {
  cp: ControlPlaneProcess;
  home: TenantFixture;
  /** A second tenant: its ids are "missing" for the first one. */
  other: TenantFixture;
  send(request: RawRequest): Promise<RawAnswer>;
  /** Every resource of both tenants as REST lists them, for before/after comparisons. */
  snapshot(): Promise<string>;
  close(): Promise<void>;
}

export const ROOT_KEY = FLEET_ROOT_KEY;

async function send(base: string, request: RawRequest): Promise<RawAnswer> {
  const res = await fetch(base + request.url, {
    method: request.method,
    headers: request.headers,
    ...(request.body !== undefined ? { body: request.body } : {}),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text, json };
}

async function seed(cp: ControlPlaneProcess, tenantId: string): Promise<TenantFixture> {
  const must = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await cp.rest(method, path, { tenant: tenantId, body });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as Record<string, unknown>;
  };
  const tenant = await cp.rest('POST', '/v1/tenants', { body: { tenant_id: tenantId, name: tenantId } });
  if (tenant.status !== 201) throw new Error(`tenant ${tenantId}: ${JSON.stringify(tenant.body)}`);
  const admin = await must('POST', '/v1/api-keys', { name: 'fuzz-admin', scopes: ['admin'] });
  const budgets = [
    await must('POST', '/v1/budgets', {
      name: 'roomy',
      type: 'hybrid',
      limits: { max_cost_usd: 1e6, max_tokens: 1e12 },
    }),
    await must('POST', '/v1/budgets', { name: 'tight', type: 'token', limits: { max_tokens: 1 }, period: 'total' }),
  ];
  const policies = [
    await must('POST', '/v1/policies', { name: 'no-shell', rules: [{ action: 'tool:shell', effect: 'deny' }] }),
    await must('POST', '/v1/policies', {
      name: 'ask-deploy',
      rules: [{ action: 'tool:deploy', effect: 'require_approval' }],
    }),
  ];
  const envelopes: Record<string, unknown>[] = [];
  // Enough envelopes that terminations by the fuzzer leave live ones to record events on.
  for (const budget of [budgets[0]!, budgets[0]!, budgets[0]!, undefined, undefined, undefined]) {
    envelopes.push(
      await must('POST', '/v1/envelopes', {
        adapter_type: 'custom',
        ...(budget !== undefined ? { budget_id: budget.budget_id } : {}),
      }),
    );
  }
  await must('POST', `/v1/envelopes/${String(envelopes[0]!.envelope_id)}/events`, {
    event_id: `seed-${randomUUID()}`,
    event_type: 'llm.call',
    timestamp: new Date().toISOString(),
    model: 'gpt-4o',
    tokens: { input: 120, output: 30 },
    cost_usd: 0.25,
  });
  const spare = await must('POST', '/v1/api-keys', { name: 'fuzz-spare', scopes: ['envelopes:read'] });
  return {
    tenantId,
    adminKey: String(admin.key_secret),
    budgetIds: budgets.map((b) => String(b.budget_id)),
    policyIds: policies.map((p) => String(p.policy_id)),
    envelopeIds: envelopes.map((e) => String(e.envelope_id)),
    keyIds: [String(spare.id)],
  };
}

/**
 * A spawned control plane (`node control-plane/main.ts`) on a real nats-server, with two seeded
 * tenants. The rate limit is lifted: the fuzz suites send thousands of requests a minute.
 */
export async function startRestTarget(): Promise<RestTarget> {
  let nats: NatsServer | undefined;
  let cp: ControlPlaneProcess | undefined;
  try {
    nats = await startNatsServer();
    cp = await controlPlaneProcess(nats.url);
    await cp.start();
    const home = await seed(cp, 'fuzz-home');
    const other = await seed(cp, 'fuzz-other');
    const running = cp;
    const base = cp.url;
    const list = async (tenant: string, path: string) => {
      const res = await send(base, {
        method: 'GET',
        url: path,
        headers: { 'x-api-key': ROOT_KEY, 'x-tenant-id': tenant },
      });
      if (res.status !== 200) throw new Error(`snapshot ${path}: ${res.status} ${res.text}`);
      return res.json;
    };
    const natsServer = nats;
    return {
      cp,
      home,
      other,
      send: (request) => send(base, request),
      async snapshot() {
        const state: Record<string, unknown> = { tenants: await list('system', '/v1/tenants') };
        for (const tenant of [home.tenantId, other.tenantId]) {
          // Time-derived views (a key or budget expiring, last use) are left out: they change
          // without any write.
          const keys = (await list(tenant, '/v1/api-keys')) as Array<Record<string, unknown>>;
          const budgets = (await list(tenant, '/v1/budgets')) as Array<Record<string, unknown>>;
          state[tenant] = {
            keys: keys.map(({ last_used_at: _used, status, ...key }) => ({ ...key, revoked: status === 'revoked' })),
            budgets: budgets.map(({ status: _status, ...budget }) => budget),
            policies: await list(tenant, '/v1/policies'),
            envelopes: await list(tenant, '/v1/envelopes?limit=1000'),
            events: await list(tenant, '/v1/events?limit=1000'),
          };
        }
        return JSON.stringify(state);
      },
      async close() {
        await running.stop();
        await natsServer.dispose();
        await removeDirs([running.dataDir]);
      },
    };
  } catch (error) {
    await killAllProcesses();
    await nats?.dispose();
    throw error;
  }
}
