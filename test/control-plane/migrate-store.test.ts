import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  eventually,
  seedTenant,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { createTestDatabase, postgresReachable } from '../harness/postgres.ts';
import { LeaseRequestSchema } from '../../core/sync/contract.ts';

const ROOT_DIR = new URL('../..', import.meta.url).pathname;
const dirs: string[] = [];
const fresh = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** `npm run migrate-store -- …` as the operator runs it (`./scripts/svc migrate-store …`). */
function migrateStore(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['control-plane/migrate-store/main.ts', ...args], {
      cwd: ROOT_DIR,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** What a tenant's REST surface shows, to compare before and after. */
async function snapshot(cp: RunningControlPlane, key: string) {
  const get = async (path: string) => {
    const res = await cp.call('GET', path, { key });
    expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
    return res.body as unknown;
  };
  const budgets = (await get('/v1/budgets')) as { budget_id: string }[];
  return {
    envelopes: await get('/v1/envelopes'),
    budgets,
    usage: await Promise.all(budgets.map((b) => get(`/v1/budgets/${b.budget_id}/usage`))),
    policies: await get('/v1/policies'),
    keys: await get('/v1/api-keys'),
    events: await get('/v1/events'),
    audit: await get('/v1/audit'),
    checkpoints: await get('/v1/checkpoints'),
    versions: await get('/v1/checkpoints/exec-m/versions'),
    context: await get('/v1/executions/exec-m/context'),
    // Soft-deleted: out of the lists, shown by id (acme), 404 elsewhere (beta).
    deletedCheckpoint: await cp
      .call('GET', '/v1/checkpoints/m-gone', { key })
      .then((res) => ({ status: res.status, checkpoint: (res.body as { checkpoint?: unknown }).checkpoint ?? null })),
  };
}

/**
 * A proxy's lease report on the `leased` budget, given back at once (no lease stays): the spend is
 * held back as reported until its events arrive, and the report's number is counted once.
 */
async function leaseReport(cp: RunningControlPlane, budgetId: string, seq: number, micros: number): Promise<number> {
  const { storage, services } = cp.plane;
  const request = LeaseRequestSchema.parse({
    tenant_id: 'acme',
    budget_id: budgetId,
    holder: 'proxy-1',
    want_tokens: 0,
    want_micros: 0,
    spent_micros: micros,
    report_seq: seq,
    release: true,
  });
  await storage.withTransaction((tx) => services.leases.handle(tx, 'acme', request));
  const budget = await storage.read.budgets.get('acme', budgetId);
  return (await storage.read.leases.pendingSpend('acme', budgetId, budget!.usage.period_start)).micros;
}

interface Filled {
  from: string;
  leasedBudget: string;
  keys: Record<'acme' | 'beta', string>;
  revokedKey: string;
  before: Record<'acme' | 'beta', Awaited<ReturnType<typeof snapshot>>>;
}

/** An LMDB store filled over REST (two tenants, more than a page of events and audit records), then stopped. */
async function filledLmdbStore(): Promise<Filled> {
  const from = fresh('migrate-from-');
  const source = await startControlPlane({ database_url: null }, from);
  const keys = { acme: await tenantWithKey(source, 'acme'), beta: await tenantWithKey(source, 'beta') };
  for (const key of Object.values(keys)) await seedTenant(source, key);
  const budget = await source.call('POST', '/v1/budgets', {
    key: keys.acme,
    body: { name: 'many', type: 'cost', limits: { max_cost_usd: 1_000 } },
  });
  const envelope = await source.call('POST', '/v1/envelopes', {
    key: keys.acme,
    body: { budget_id: budget.body.budget_id, adapter_type: 'custom' },
  });
  const leased = await source.call('POST', '/v1/budgets', {
    key: keys.acme,
    body: { name: 'leased', type: 'cost', limits: { max_cost_usd: 10 } },
  });
  expect(await leaseReport(source, String(leased.body.budget_id), 1, 500)).toBe(500);
  for (const id of ['m-kept', 'm-gone']) {
    const saved = await source.call('POST', '/v1/checkpoints', {
      key: keys.acme,
      body: {
        checkpoint: { checkpoint_id: id, envelope_id: envelope.body.envelope_id, execution_id: 'exec-m', data: { id } },
        auto_version: true,
      },
    });
    expect(saved.status).toBe(200);
  }
  expect((await source.call('DELETE', '/v1/checkpoints/m-gone?soft_delete=true', { key: keys.acme })).status).toBe(200);
  const context = await source.call('PUT', '/v1/executions/exec-m/context', {
    key: keys.acme,
    body: { updates: { step: 2 } },
  });
  expect(context.status).toBe(200);
  // Both saves announced themselves as events: recorded before the snapshot.
  await eventually(
    () => source.call('GET', '/v1/events?event_type=checkpoint.*', { key: keys.acme }),
    (res) => (res.body as unknown[]).length === 2,
  );
  for (let i = 0; i < 120; i++) {
    const event = await source.call('POST', `/v1/envelopes/${envelope.body.envelope_id}/events`, {
      key: keys.acme,
      body: { event_type: 'llm.call', timestamp: new Date().toISOString(), cost_usd: 0.01 },
    });
    expect(event.status).toBe(202);
  }
  const revoked = await source.call('POST', '/v1/api-keys', {
    key: keys.beta,
    body: { name: 'old', scopes: ['admin'] },
  });
  expect((await source.call('DELETE', `/v1/api-keys/${revoked.body.id}`, { key: keys.beta })).status).toBe(200);
  const before = { acme: await snapshot(source, keys.acme), beta: await snapshot(source, keys.beta) };
  await source.close();
  return {
    from,
    leasedBudget: String(leased.body.budget_id),
    keys,
    revokedKey: String(revoked.body.key_secret),
    before,
  };
}

/** Runs the command into `to`, then a control plane on the target, which must show what the source did. */
async function migrateAndCompare(filled: Filled, to: string, overrides: Record<string, unknown>, dataDir?: string) {
  const run = await migrateStore('--from', `lmdb:${filled.from}`, '--to', to);
  expect(run.code, run.stderr).toBe(0);
  const line = run.stdout.split('\n').find((l) => l.startsWith('{"migrated"'));
  expect(line, run.stdout).toBeDefined();
  const report = JSON.parse(line!) as { migrated: Record<string, number> };
  expect(report.migrated).toMatchObject({ tenants: 2, events: 124, checkpoints: 2, executionContexts: 1 });

  const target = await startControlPlane(overrides, dataDir);
  try {
    for (const tenant of ['acme', 'beta'] as const) {
      expect(await snapshot(target, filled.keys[tenant])).toEqual(filled.before[tenant]);
      const verified = await target.call('GET', '/v1/audit/verify', { key: filled.keys[tenant] });
      expect(verified.body).toMatchObject({ valid: true });
    }
    expect((await target.call('GET', '/v1/audit/verify')).body).toMatchObject({ valid: true });
    // The report sent again after the move (its answer lost) is counted once; the next one counts.
    expect(await leaseReport(target, filled.leasedBudget, 1, 500)).toBe(500);
    expect(await leaseReport(target, filled.leasedBudget, 2, 200)).toBe(700);
    // The revoked key stays revoked; a write on the target extends the migrated chain.
    expect((await target.call('GET', '/v1/budgets', { key: filled.revokedKey })).status).toBe(401);
    const policy = await target.call('POST', '/v1/policies', {
      key: filled.keys.acme,
      body: { name: 'after', rules: [{ action: 'tool:rm', effect: 'deny' }] },
    });
    expect(policy.status).toBe(201);
    expect((await target.call('GET', '/v1/audit/verify', { key: filled.keys.acme })).body).toMatchObject({
      valid: true,
    });
  } finally {
    await target.close();
  }

  // A second run into the same store is refused whole: nothing is copied over what is there.
  const again = await migrateStore('--from', `lmdb:${filled.from}`, '--to', to);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain('SVC-SYS-9008');
  expect(again.stderr).toContain('not empty');
}

const postgres = await postgresReachable();

describe('svc migrate-store', () => {
  it('copies an LMDB store filled over REST into an empty LMDB store: same state, same keys, a verifying chain', async () => {
    const to = fresh('migrate-to-');
    await migrateAndCompare(await filledLmdbStore(), `lmdb:${to}`, { database_url: null }, to);
  });

  it.skipIf(!postgres)('copies it into an empty PostgreSQL database just the same', async () => {
    const database = await createTestDatabase();
    try {
      await migrateAndCompare(await filledLmdbStore(), database.url, { database_url: database.url });
    } finally {
      await database.drop();
    }
  });

  it('refuses a location that is neither lmdb: nor postgres://, naming the flag, and keeps passwords out', async () => {
    const run = await migrateStore('--from', 'mysql://root:hunter2-secret@db/x', '--to', 'lmdb:/tmp/x');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('SVC-SYS-9002');
    expect(run.stderr).toContain('--from');
    expect(run.stderr).not.toContain('hunter2-secret');
  });
});
