import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { expect } from 'vitest';
import type { BusMessage, Messaging } from '../../core/bus/bus.ts';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { loadConfig } from '../../core/config/load.ts';
import type { Config } from '../../core/config/schema.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createControlPlane, type ControlPlane } from '../../control-plane/create-control-plane.ts';
import { createPricer } from '../../control-plane/usage/pricer.ts';
import { controlPlaneDatabase, type ControlPlaneDatabase } from './postgres.ts';

export { eventually } from './eventually.ts';

export const ROOT_KEY = 'root-administrator-key-for-tests-0001';

export interface RunningControlPlane {
  url: string;
  plane: ControlPlane;
  messaging: Messaging;
  dataDir: string;
  /** The PostgreSQL database it runs on (SVC_TEST_STORAGE=postgres), else null (LMDB in `dataDir`). */
  databaseUrl: string | null;
  /** Everything published on the bus since start, in order. */
  published: BusMessage[];
  /** Sends a request as `key` (default: the root administrator) and parses the JSON answer. */
  call(
    method: string,
    path: string,
    options?: { key?: string | null; body?: unknown; headers?: Record<string, string>; raw?: string },
  ): Promise<{ status: number; body: any; headers: Headers }>;
  /** Closes and opens again on the same data directory and database, running `whileStopped` in between. */
  restart(whileStopped?: (dataDir: string) => Promise<void>): Promise<RunningControlPlane>;
  close(): Promise<void>;
}

/**
 * A real control plane on a free port with its own storage (an LMDB directory, or a PostgreSQL
 * database under SVC_TEST_STORAGE=postgres, dropped by `close`) and in-process messaging, or the
 * messaging `openMessaging` gives (a NATS connection; closed with the control plane).
 * `database_url: null` runs it on LMDB under any SVC_TEST_STORAGE.
 */
export async function startControlPlane(
  overrides: Partial<Record<keyof Config, unknown>> = {},
  dataDir = mkdtempSync(join(tmpdir(), 'cp-')),
  openMessaging?: () => Promise<Messaging>,
  clock?: () => Date,
): Promise<RunningControlPlane> {
  // `database_url: null` asks for LMDB whatever SVC_TEST_STORAGE says (a suite about LMDB itself).
  const { database_url: url, ...rest } = overrides;
  const database = url === undefined ? await controlPlaneDatabase() : null;
  try {
    return await start(url === null ? rest : overrides, dataDir, database, openMessaging, clock);
  } catch (error) {
    await database?.drop();
    throw error;
  }
}

async function start(
  overrides: Partial<Record<keyof Config, unknown>>,
  dataDir: string,
  database: ControlPlaneDatabase | null,
  openMessaging: (() => Promise<Messaging>) | undefined,
  clock: (() => Date) | undefined,
): Promise<RunningControlPlane> {
  const config = loadConfig(
    {},
    {
      ...database?.config,
      data_dir: dataDir,
      http_host: '127.0.0.1',
      http_port: 0,
      grpc_port: 0,
      bootstrap_admin_key: ROOT_KEY,
      log_level: 'silent',
      // Suites poll over REST every 20 ms; a suite about the limit sets its own.
      rate_limit_per_minute: 1_000_000,
      ...overrides,
    },
  );
  const logger = pino({ level: 'silent' });
  const messaging = openMessaging === undefined ? createMemoryMessaging({ logger }) : await openMessaging();
  const published: BusMessage[] = [];
  for (const family of ['envelopes', 'events', 'budgets', 'policies']) {
    await messaging.bus.subscribe(`svc.*.${family}.>`, (m) => {
      published.push(m);
      return Promise.resolve();
    });
  }
  const plane = await createControlPlane({
    config,
    logger,
    messaging,
    pricer: createPricer(loadPriceTable()),
    ...(clock === undefined ? {} : { clock }),
  });
  const url = await plane.listen();
  const stop = async () => {
    await plane.close();
    await messaging.close();
  };
  const running: RunningControlPlane = {
    url,
    plane,
    messaging,
    dataDir,
    databaseUrl: database?.url ?? null,
    published,
    async call(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const key = options.key === undefined ? ROOT_KEY : options.key;
      if (key !== null) headers['x-api-key'] = key;
      let payload: string | undefined = options.raw;
      if (options.body !== undefined) payload = JSON.stringify(options.body);
      if (payload !== undefined) headers['content-type'] ??= 'application/json';
      const response = await fetch(url + path, {
        method,
        headers,
        ...(payload !== undefined ? { body: payload } : {}),
      });
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Prometheus text and other non-JSON bodies stay as text.
      }
      return { status: response.status, body, headers: response.headers };
    },
    async restart(whileStopped) {
      await stop();
      await whileStopped?.(dataDir);
      return start(overrides, dataDir, database, openMessaging, clock);
    },
    async close() {
      await stop();
      await database?.drop();
    },
  };
  return running;
}

/** Creates a tenant and an admin key for it as the root administrator; returns the key. */
export async function tenantWithKey(
  cp: RunningControlPlane,
  tenantId: string,
  scopes: string[] = ['admin'],
): Promise<string> {
  const tenant = await cp.call('POST', '/v1/tenants', { body: { tenant_id: tenantId, name: tenantId } });
  if (tenant.status !== 201 && tenant.status !== 409)
    throw new Error(`tenant ${tenantId}: ${JSON.stringify(tenant.body)}`);
  const key = await cp.call('POST', '/v1/api-keys', {
    body: { name: `${tenantId}-key`, scopes },
    headers: { 'x-tenant-id': tenantId },
  });
  if (key.status !== 201) throw new Error(`key for ${tenantId}: ${JSON.stringify(key.body)}`);
  return key.body.key_secret as string;
}

/** One of each resource a tenant owns, made over REST; suites read them back or attack them. */
export interface TenantResources {
  budgetId: string;
  policyId: string;
  envelopeId: string;
  /** A second key of the tenant (not the one that made these). */
  keyId: string;
}

/**
 * Creates a budget, a policy (denying `tool:shell`), an envelope with one priced event, and a
 * second API key, all as `key`. Fails loudly if any step is refused, so a suite never runs on
 * half a fixture.
 */
export async function seedTenant(cp: RunningControlPlane, key: string): Promise<TenantResources> {
  const ok = async (method: string, path: string, body: unknown, status: number) => {
    const res = await cp.call(method, path, { key, body });
    if (res.status !== status) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as Record<string, unknown>;
  };
  const budget = await ok(
    'POST',
    '/v1/budgets',
    { name: 'seed', type: 'hybrid', limits: { max_cost_usd: 10, max_tokens: 100_000 } },
    201,
  );
  const policy = await ok(
    'POST',
    '/v1/policies',
    { name: 'no-shell', rules: [{ action: 'tool:shell', effect: 'deny' }], priority: 300 },
    201,
  );
  const envelope = await ok('POST', '/v1/envelopes', { budget_id: budget.budget_id, adapter_type: 'custom' }, 201);
  await ok(
    'POST',
    `/v1/envelopes/${String(envelope.envelope_id)}/events`,
    {
      event_type: 'llm.call',
      timestamp: new Date().toISOString(),
      model: 'gpt-4o',
      tokens: { input: 120, output: 30 },
      cost_usd: 0.25,
    },
    202,
  );
  const apiKey = await ok('POST', '/v1/api-keys', { name: 'seed-reader', scopes: ['envelopes:read'] }, 201);
  return {
    budgetId: String(budget.budget_id),
    policyId: String(policy.policy_id),
    envelopeId: String(envelope.envelope_id),
    keyId: String(apiKey.id),
  };
}

/**
 * Asserts an error answer: the status, and the structured error of spec 7.1 with `code`
 * (message, details, request_id echoed in `x-request-id`, timestamp, documentation_url).
 * Returns the `error` object for further checks.
 */
export function expectSvcError(
  res: { status: number; body: unknown; headers: Headers },
  status: number,
  code: string,
): Record<string, unknown> {
  const error = (res.body as { error?: Record<string, unknown> } | null)?.error;
  expect({ status: res.status, code: error?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  expect({
    message: typeof error?.message,
    details: typeof error?.details,
    request_id: typeof error?.request_id,
  }).toEqual({ message: 'string', details: 'object', request_id: 'string' });
  expect(String(error?.documentation_url)).toContain(code);
  expect(Number.isNaN(Date.parse(String(error?.timestamp)))).toBe(false);
  expect(res.headers.get('x-request-id')).toBe(error?.request_id);
  return error ?? {};
}
