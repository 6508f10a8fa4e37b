import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Messaging } from '../../core/bus/bus.ts';
import { loadConfig } from '../../core/config/load.ts';
import type { Config } from '../../core/config/schema.ts';
import { NO_LIMITS, type Budget } from '../../core/domain/index.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createControlPlane, type ControlPlane } from '../../control-plane/create-control-plane.ts';
import { createPricer } from '../../control-plane/usage/pricer.ts';
import { createTestDatabase } from '../harness/postgres.ts';

/** `--backend=lmdb` (default) or `--backend=postgres`; the other arguments, in order. */
export function benchArguments(argv = process.argv.slice(2)): { backend: 'lmdb' | 'postgres'; args: string[] } {
  const flag = argv.find((a) => a.startsWith('--backend='));
  const backend = flag?.slice('--backend='.length) ?? 'lmdb';
  if (backend !== 'lmdb' && backend !== 'postgres') throw new Error(`--backend: lmdb or postgres, not ${backend}`);
  return { backend, args: argv.filter((a) => !a.startsWith('--')) };
}

/**
 * The storage settings of a bench's control plane: a fresh LMDB directory, or a fresh database
 * on the test server (test/harness/postgres.ts: 127.0.0.1:5432 or SVC_TEST_DATABASE_URL);
 * `dispose` removes the directory and drops the database.
 */
export async function benchStorage(backend: 'lmdb' | 'postgres'): Promise<{
  config: { data_dir: string; database_url?: string; database_pool_size?: number };
  dispose(): Promise<void>;
}> {
  const data_dir = mkdtempSync(join(tmpdir(), 'bench-cp-'));
  const removeDir = () => rm(data_dir, { recursive: true, force: true });
  if (backend === 'lmdb') return { config: { data_dir }, dispose: removeDir };
  const database = await createTestDatabase();
  return {
    config: { data_dir, database_url: database.url, database_pool_size: 10 },
    dispose: async () => {
      await database.drop();
      await removeDir();
    },
  };
}

/** Who the benches act as: the bootstrap administrator, for tenant `bench`. */
export const BENCH_CALLER = {
  principal: {
    type: 'bootstrap' as const,
    id: 'bench',
    tenant_id: 'system',
    scopes: new Set(['admin' as const]),
    administrator: true,
  },
  tenant: 'bench',
  requestId: 'bench',
};

/** A control plane on a fresh store of `backend`, over `messaging`; `close` also drops the store. */
export async function benchControlPlane(
  backend: 'lmdb' | 'postgres',
  messaging: Messaging,
  logger: Logger,
): Promise<{ plane: ControlPlane; config: Config; close: () => Promise<void> }> {
  const storage = await benchStorage(backend);
  const config = loadConfig(process.env, { ...storage.config, http_port: 0, grpc_port: 0, log_level: 'silent' });
  const plane = await createControlPlane({ config, logger, messaging, pricer: createPricer(loadPriceTable()) });
  return {
    plane,
    config,
    close: async () => {
      await plane.close();
      await storage.dispose();
    },
  };
}

/** Tenant `bench` and a monthly budget of it that the benches' calls never exhaust. */
export async function benchTenantBudget(plane: ControlPlane): Promise<Budget> {
  await plane.storage.withTransaction((tx) =>
    plane.services.tenants.create(tx, { tenant_id: 'bench', name: 'bench', created_at: new Date().toISOString() }),
  );
  return plane.services.budgets.create(BENCH_CALLER, {
    name: 'bench',
    type: 'cost',
    period: 'monthly',
    limits: { ...NO_LIMITS, max_cost_usd: 1e9 },
  });
}
