import type { OutboxEvent } from '../../../core/outbox/outbox-storage.ts';
import type {
  ApiKeyRepository,
  ApprovalRepository,
  AuditRepository,
  BudgetRepository,
  CheckpointRepository,
  DedupRepository,
  DetectionRepository,
  EnvelopeRepository,
  EventRepository,
  ExecutionContextRepository,
  JobLeaseRepository,
  LeaseRepository,
  OutboxRepository,
  PolicyRepository,
  Readers,
  Repositories,
  TenantRepository,
} from '../storage.ts';
import { LmdbApiKeys } from './api-keys.ts';
import { LmdbApprovals } from './approvals.ts';
import { LmdbAudit } from './audit.ts';
import { LmdbBudgets } from './budgets.ts';
import { LmdbCheckpoints } from './checkpoints.ts';
import { LmdbDedup } from './dedup.ts';
import { LmdbDetections } from './detections.ts';
import { LmdbEnvelopes } from './envelopes.ts';
import { LmdbEvents } from './events.ts';
import { LmdbExecutionContexts } from './execution-contexts.ts';
import { LmdbJobs, type JobLeases } from './jobs.ts';
import type { KvView, StagedView } from './kv.ts';
import type { Layout } from './layout.ts';
import { LmdbLeases } from './leases.ts';
import { LmdbPolicies } from './policies.ts';
import { promised, type Sync } from './promised.ts';
import { LmdbTenants } from './tenants.ts';

/** The repositories of records, over committed state (`read`) or a transaction's view. */
export function recordRepositories(
  kv: KvView,
  layout: Layout,
): Omit<Repositories, 'outbox' | 'dedup' | 'jobs'> & Readers {
  return {
    tenants: promised<TenantRepository>(new LmdbTenants(kv, layout)),
    envelopes: promised<EnvelopeRepository>(new LmdbEnvelopes(kv, layout)),
    budgets: promised<BudgetRepository>(new LmdbBudgets(kv, layout)),
    policies: promised<PolicyRepository>(new LmdbPolicies(kv, layout)),
    apiKeys: promised<ApiKeyRepository>(new LmdbApiKeys(kv, layout)),
    audit: promised<AuditRepository>(new LmdbAudit(kv, layout)),
    events: promised<EventRepository>(new LmdbEvents(kv, layout)),
    leases: promised<LeaseRepository>(new LmdbLeases(kv, layout)),
    approvals: promised<ApprovalRepository>(new LmdbApprovals(kv, layout)),
    detections: promised<DetectionRepository>(new LmdbDetections(kv, layout)),
    checkpoints: promised<CheckpointRepository>(new LmdbCheckpoints(kv, layout)),
    executionContexts: promised<ExecutionContextRepository>(new LmdbExecutionContexts(kv, layout)),
  };
}

/** Outbox events a transaction appends, written in its commit. */
class StagedOutbox implements Sync<OutboxRepository> {
  readonly events: OutboxEvent[] = [];

  append(events: readonly OutboxEvent[]): void {
    this.events.push(...events);
  }
}

/** A transaction's repositories over its staged view, and what its commit has to carry out. */
export function transactionRepositories(
  kv: StagedView,
  layout: Layout,
  jobLeases: JobLeases,
): { repositories: Repositories; outbox: StagedOutbox; jobs: LmdbJobs } {
  const outbox = new StagedOutbox();
  const jobs = new LmdbJobs(jobLeases);
  const repositories: Repositories = {
    ...recordRepositories(kv, layout),
    outbox: promised<OutboxRepository>(outbox),
    dedup: promised<DedupRepository>(new LmdbDedup(kv, layout)),
    jobs: promised<JobLeaseRepository>(jobs),
  };
  return { repositories, outbox, jobs };
}
