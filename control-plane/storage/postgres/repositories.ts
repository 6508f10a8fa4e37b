import type { Readers, Repositories } from '../storage.ts';
import { PgApiKeys } from './api-keys.ts';
import { PgApprovals } from './approvals.ts';
import { AuditDrafts, PgAudit } from './audit.ts';
import { PgBudgets } from './budgets.ts';
import { PgCheckpoints } from './checkpoints.ts';
import { PgDedup } from './dedup.ts';
import { PgDetections } from './detections.ts';
import { PgEnvelopes } from './envelopes.ts';
import { PgEvents } from './events.ts';
import { PgExecutionContexts } from './execution-contexts.ts';
import { PgJobs } from './jobs.ts';
import { PgLeases } from './leases.ts';
import { PgOutboxAppends } from './outbox.ts';
import { PgPolicies } from './policies.ts';
import { refusingNul, type Sql } from './sql.ts';
import { PgTenants } from './tenants.ts';

function records(sql: Sql, drafts: AuditDrafts | null): Readers & Omit<Repositories, 'outbox' | 'dedup' | 'jobs'> {
  return {
    tenants: new PgTenants(sql),
    envelopes: new PgEnvelopes(sql),
    budgets: new PgBudgets(sql),
    policies: new PgPolicies(sql),
    apiKeys: new PgApiKeys(sql),
    audit: new PgAudit(sql, drafts),
    events: new PgEvents(sql),
    leases: new PgLeases(sql),
    approvals: new PgApprovals(sql),
    detections: new PgDetections(sql),
    checkpoints: new PgCheckpoints(sql),
    executionContexts: new PgExecutionContexts(sql),
  };
}

/** Reads of committed state, each statement on a free connection of the pool. */
export function readers(pool: Sql): Readers {
  return records(refusingNul(pool), null);
}

/**
 * A transaction's repositories on its one connection, with what its commit has to finish: the
 * audit drafts to seal, and whether it appended to the outbox.
 */
export function transactionRepositories(connection: Sql): {
  repositories: Repositories;
  audit: AuditDrafts;
  outbox: PgOutboxAppends;
} {
  const client = refusingNul(connection);
  const audit = new AuditDrafts();
  const outbox = new PgOutboxAppends(client);
  return {
    repositories: { ...records(client, audit), outbox, dedup: new PgDedup(client), jobs: new PgJobs(client) },
    audit,
    outbox,
  };
}
