import type {
  ApiKeyRecord,
  AuditRecord,
  Budget,
  CostTotals,
  Envelope,
  EnvelopeStatus,
  Overflow,
  Tenant,
  UsageDelta,
} from '../../core/domain/index.ts';
import type { DetectionKind, ImmuneDetection } from '../../core/brain/immune/detection.ts';
import type { OutboxEvent, OutboxStorage } from '../../core/outbox/outbox-storage.ts';
import type { Checkpoint, CheckpointOrder, CheckpointType, ExecutionContext } from '../checkpoints/checkpoint.ts';
import type { Approval, ApprovalStatus, Policy } from '../../core/policy/index.ts';
import type { AuditDraft } from '../audit/chain.ts';
import type { AuditHead, LeaseRecord, LeaseReport, Spend, StoredEvent, WebhookSecretRecord } from './records.ts';

/**
 * The control plane's storage: one interface, two backends (LMDB embedded, PostgreSQL for N
 * replicas; docs/storage.md). Domain services reach their state only through these repositories.
 *
 * Rules every backend keeps, and every caller may rely on:
 * - Every method that reads or writes a tenant's records takes the tenant first, and a record of
 *   one tenant is never returned for another (only the tenant registry and the API key id lookup
 *   are global).
 * - Counters change by stated deltas in one step (`addUsage`, `reserveExecution`, `charge`,
 *   `bumpVersion`, lease spend), never by a read in the service and a write back, so concurrent
 *   transactions of several replicas lose no update. The first such change of a row holds it until
 *   the transaction ends, so what a service decides from the returned record cannot interleave.
 * - Uniqueness is the backend's: a taken tenant id, budget id, policy id, API key id or execution
 *   id is refused with SVC-SYS-9008 naming the field, and nothing of the transaction is kept.
 * - Records returned are the caller's to read, not to change in place.
 */
export interface Storage {
  readonly backend: 'lmdb' | 'postgres';
  /** Reads outside a transaction: each call sees committed state. */
  readonly read: Readers;
  /**
   * Runs `fn` in one transaction: everything it writes commits together or not at all, and its
   * reads see its own writes. Not to be nested (a nested call is refused).
   *
   * PostgreSQL: READ COMMITTED, retried (bounded) on a serialization failure or deadlock, so `fn`
   * must be safe to run again; effects leave through the outbox, which is in the transaction.
   * LMDB: one writer at a time (an async lock per storage), writes staged in memory; transactions
   * that end while a commit is under way are committed together, each resolving once its commit
   * is flushed to disk (docs/storage.md).
   */
  withTransaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<T>;
  /**
   * The outbox's drain side, for `core/outbox`'s publisher: claim the oldest events in order,
   * remove them once the bus acknowledged them. Appends happen in transactions (`tx.outbox`).
   */
  readonly outbox: OutboxStorage;
  health(): Promise<{ status: 'ok' | 'down'; detail?: string }>;
  /** The number of the last migration applied (reported by GET /version). */
  schemaVersion(): Promise<number>;
  close(): Promise<void>;
}

/** Paging of every list: at most `pageSize` items (default 20, at most 100) after `pageToken`. */
export interface PageRequest {
  pageSize?: number | undefined;
  /** The `nextPageToken` of the page before; absent for the first page. */
  pageToken?: string | null | undefined;
}

export interface Page<T> {
  items: T[];
  /** Opaque (base64url); null when this page is the last. */
  nextPageToken: string | null;
}

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/** What reads see outside a transaction. */
export interface Readers {
  tenants: TenantReader;
  envelopes: EnvelopeReader;
  budgets: BudgetReader;
  policies: PolicyReader;
  apiKeys: ApiKeyReader;
  audit: AuditReader;
  events: EventReader;
  leases: LeaseReader;
  approvals: ApprovalReader;
  detections: DetectionReader;
  checkpoints: CheckpointReader;
  executionContexts: ExecutionContextReader;
}

/** What a transaction reads and writes. */
export interface Repositories {
  tenants: TenantRepository;
  envelopes: EnvelopeRepository;
  budgets: BudgetRepository;
  policies: PolicyRepository;
  apiKeys: ApiKeyRepository;
  audit: AuditRepository;
  events: EventRepository;
  leases: LeaseRepository;
  approvals: ApprovalRepository;
  detections: DetectionRepository;
  checkpoints: CheckpointRepository;
  executionContexts: ExecutionContextRepository;
  outbox: OutboxRepository;
  dedup: DedupRepository;
  jobs: JobLeaseRepository;
}

/** The tenant registry (global) and each tenant's webhook signing secret. */
export interface TenantReader {
  get(tenantId: string): Promise<Tenant | undefined>;
  /** Whether the tenant is registered, without reading its record. */
  exists(tenantId: string): Promise<boolean>;
  /** By tenant id. */
  list(page?: PageRequest): Promise<Page<Tenant>>;
  webhookSecret(tenantId: string): Promise<WebhookSecretRecord | undefined>;
}

export interface TenantRepository extends TenantReader {
  /** SVC-SYS-9008 (field `tenant_id`) when the id is taken. */
  create(tenant: Tenant): Promise<void>;
  /** Reads the tenant and holds it against other writers until the transaction ends. */
  getForUpdate(tenantId: string): Promise<Tenant | undefined>;
  /** Replaces a tenant read with `getForUpdate` in the same transaction. */
  replace(tenant: Tenant): Promise<void>;
  /** Stores the tenant's first secret unless it has one already; returns the one it has now. */
  issueWebhookSecret(tenantId: string, record: WebhookSecretRecord): Promise<WebhookSecretRecord>;
  /** Replaces the tenant's secret (a rotation). */
  putWebhookSecret(tenantId: string, record: WebhookSecretRecord): Promise<void>;
}

export interface EnvelopeFilter {
  status?: EnvelopeStatus | undefined;
  budgetId?: string | undefined;
}

/** The fields a status change sets. */
export type StatusChange = Pick<Envelope, 'status' | 'status_reason' | 'updated_at' | 'completed_at'>;

export interface EnvelopeReader {
  get(tenant: string, envelopeId: string): Promise<Envelope | undefined>;
  /** Those of the envelopes named that exist, in one read (an id not found is left out), in no set order. */
  getMany(tenant: string, envelopeIds: readonly string[]): Promise<Envelope[]>;
  /**
   * By envelope id; a filtered page holds up to `pageSize` matching envelopes, and may hold fewer
   * (even none) with a token where the backend bounds the rows one page reads.
   */
  list(tenant: string, filter: EnvelopeFilter, page?: PageRequest): Promise<Page<Envelope>>;
  /**
   * Newest first (by creation time, then id), of the statuses given when given: read from an
   * index in that order, so the newest page is found however many envelopes the tenant has. A
   * page of some statuses may hold fewer than `pageSize` (even none) with a token, as `list`.
   */
  listNewest(
    tenant: string,
    filter: { statuses?: readonly EnvelopeStatus[] | undefined },
    page?: PageRequest,
  ): Promise<Page<Envelope>>;
  /**
   * The budget's envelopes that have not ended (no final status), by envelope id; a page may hold
   * fewer than `pageSize` (even none) with a token, as `list`.
   */
  listLive(tenant: string, budgetId: string, page?: PageRequest): Promise<Page<Envelope>>;
}

/** What `chargeMany` adds to one envelope. */
export interface EnvelopeCharge {
  envelopeId: string;
  delta: CostTotals;
  updatedAt: string;
}

export interface EnvelopeRepository extends EnvelopeReader {
  /**
   * Those of the envelopes named that exist, as `getMany`, each held against changes by other
   * transactions until this one ends; taken in id order, so that two such calls cannot deadlock.
   */
  getManyForUpdate(tenant: string, envelopeIds: readonly string[]): Promise<Envelope[]>;
  /**
   * Stores a new envelope; its execution id is unique per tenant. When the execution id has an
   * envelope already, `refuse` throws SVC-SYS-9008 (field `execution_id`) and `keep` stores the
   * envelope while the execution id stays with the one that has it. False, and nothing written,
   * when the envelope id exists.
   */
  insert(tenant: string, envelope: Envelope, options: { executionTaken: 'refuse' | 'keep' }): Promise<boolean>;
  /**
   * Stores new envelopes as `insert` with `executionTaken: 'keep'` would, one after another in
   * list order: an execution id taken before, or by an envelope earlier in the list, stays with
   * the envelope that has it. Returns the ids stored; an envelope id that exists (or came earlier
   * in the list) is left out, and nothing of it is written. On PostgreSQL one statement for all
   * of them (a second for their per-model costs, when any has some).
   */
  insertMany(tenant: string, envelopes: readonly Envelope[]): Promise<string[]>;
  /**
   * Adds `delta` to the cost totals and, per model, to the model costs (a model not listed yet is
   * appended); sets `updated_at`. Each total is bounded as `overflow` says: `refuse` throws
   * SVC-EVT-4002 naming the total, `saturate` holds it at its maximum. The envelope after the
   * change, or undefined when there is none.
   */
  charge(
    tenant: string,
    envelopeId: string,
    delta: CostTotals,
    overflow: Overflow,
    updatedAt: string,
  ): Promise<Envelope | undefined>;
  /**
   * `charge` with `saturate` for many envelopes of the tenant at once, each named once; one that
   * does not exist is left out. For envelopes the transaction already holds (read with
   * `getManyForUpdate`, or inserted by it): it locks them in no set order. On PostgreSQL two
   * statements for all of them, where `charge` takes two for each.
   */
  chargeMany(tenant: string, charges: readonly EnvelopeCharge[]): Promise<void>;
  /**
   * Sets the status fields if the envelope's status is still `from` (compare and set): the
   * envelope after the change, or undefined when it is absent or its status moved meanwhile.
   */
  transition(
    tenant: string,
    envelopeId: string,
    from: EnvelopeStatus,
    change: StatusChange,
  ): Promise<Envelope | undefined>;
  /** `transition` without reading the envelope back: whether its status moved. */
  changeStatus(tenant: string, envelopeId: string, from: EnvelopeStatus, change: StatusChange): Promise<boolean>;
}

/** A budget period: `start` identifies it; `end` is null for the `total` period. */
export interface PeriodWindow {
  start: string;
  end: string | null;
}

export interface BudgetReader {
  /** As stored: its usage may belong to a period that has ended (`rollOver` reads it as of now). */
  get(tenant: string, budgetId: string): Promise<Budget | undefined>;
  /** By budget id. */
  list(tenant: string, page?: PageRequest): Promise<Page<Budget>>;
}

/** What defines a budget, apart from its identity, period and usage: what an update may change. */
export type BudgetDefinition = Pick<
  Budget,
  'name' | 'description' | 'type' | 'limits' | 'alerts' | 'expires_at' | 'workflow_id' | 'tags'
>;

export interface BudgetRepository extends BudgetReader {
  /** SVC-SYS-9008 (field `budget_id`) when the id is taken. */
  insert(tenant: string, budget: Budget): Promise<void>;
  /** Deletes the budget; false when there is none. */
  remove(tenant: string, budgetId: string): Promise<boolean>;
  /**
   * Replaces the definition of a stored budget and sets `updated_at`; its usage (changed by other
   * transactions meanwhile) stays as it is. The budget after, or undefined when there is none.
   */
  redefine(
    tenant: string,
    budgetId: string,
    definition: BudgetDefinition,
    updatedAt: string,
  ): Promise<Budget | undefined>;
  /**
   * The budget, held against changes by other transactions until this one ends, for decisions
   * made from it and written in the same transaction (lease grants).
   */
  getForUpdate(tenant: string, budgetId: string): Promise<Budget | undefined>;
  /** Those of the budgets named that exist, each as `getForUpdate`, taken in id order. */
  getManyForUpdate(tenant: string, budgetIds: readonly string[]): Promise<Budget[]>;
  /**
   * Adds `delta` to the usage of `period` and sets `updated_at`. A stored usage of an earlier
   * period is replaced by a fresh one for `period` first (counters and fired alerts reset); one of
   * the same or a later period is added to. Totals are bounded as `overflow` says (SVC-EVT-4002
   * under `refuse`, nothing changed). The budget after the change, or undefined when there is none.
   */
  addUsage(
    tenant: string,
    budgetId: string,
    delta: UsageDelta,
    period: PeriodWindow,
    overflow: Overflow,
    updatedAt: string,
  ): Promise<Budget | undefined>;
  /**
   * Counts one more execution in `period` (rolled over as in `addUsage`) unless the budget's
   * `max_executions` is reached: `reserved` says whether it was counted; `budget` is the budget
   * after. Undefined when there is no such budget.
   */
  reserveExecution(
    tenant: string,
    budgetId: string,
    period: PeriodWindow,
    updatedAt: string,
  ): Promise<{ reserved: boolean; budget: Budget } | undefined>;
  /**
   * Adds the alert thresholds to those fired in the period starting `periodStart`: returns the ones
   * this call added (not fired before), so that only one transaction announces each. None when
   * the stored usage is of another period.
   */
  markAlertsFired(
    tenant: string,
    budgetId: string,
    periodStart: string,
    percents: readonly number[],
  ): Promise<number[]>;
}

export interface PolicyReader {
  get(tenant: string, policyId: string): Promise<Policy | undefined>;
  /** By policy id. */
  list(tenant: string, page?: PageRequest): Promise<Page<Policy>>;
  /** The tenant's ruleset version: 0 before its first policy write. */
  version(tenant: string): Promise<number>;
}

export interface PolicyRepository extends PolicyReader {
  /** SVC-SYS-9008 (field `policy_id`) when the id is taken. */
  insert(tenant: string, policy: Policy): Promise<void>;
  /** One more than the version before; returns it. Every policy write bumps it in its transaction. */
  bumpVersion(tenant: string): Promise<number>;
  /**
   * Stores a new revision of a stored policy if its stored `version` is still `expectedVersion`
   * (compare and set): false, nothing written, when it is absent or another revision came first.
   */
  replace(tenant: string, policy: Policy, expectedVersion: number): Promise<boolean>;
  /** Deletes the policy: false when there was none. */
  remove(tenant: string, policyId: string): Promise<boolean>;
}

export interface ApiKeyReader {
  get(tenant: string, keyId: string): Promise<ApiKeyRecord | undefined>;
  /** By key id. */
  list(tenant: string, page?: PageRequest): Promise<Page<ApiKeyRecord>>;
  /** Which tenant a key id belongs to: the one lookup made before the tenant is known. */
  tenantOf(keyId: string): Promise<string | undefined>;
}

export interface ApiKeyRepository extends ApiKeyReader {
  /** SVC-SYS-9008 (field `id`) when the key id is taken, in any tenant. */
  insert(tenant: string, record: ApiKeyRecord): Promise<void>;
  /**
   * Whether the key exists unrevoked, and stays so until the transaction commits: a key created
   * after this by it is either refused or revoked with it.
   */
  holdUnrevoked(keyId: string): Promise<boolean>;
  /**
   * Sets `revoked_at` unless the key is revoked already, and so on every key it created and
   * theirs, in any tenant; the key's record after, or undefined.
   */
  revoke(tenant: string, keyId: string, at: string): Promise<ApiKeyRecord | undefined>;
}

export interface AuditFilter {
  /** `newest` first (queries) or `oldest` first (verification walks the chain in order). */
  order: 'newest' | 'oldest';
  action?: string | undefined;
  resourceType?: string | undefined;
  actorId?: string | undefined;
}

export interface AuditReader {
  /**
   * A filtered page holds up to `pageSize` matching records, in sequence order as asked. A backend
   * may bound the rows one page reads: a page may then hold fewer (even none) and still carry a
   * token; only a null token ends the list.
   */
  list(tenant: string, filter: AuditFilter, page?: PageRequest): Promise<Page<AuditRecord>>;
  /** The last record of the tenant's chain, as the chain's head remembers it. */
  head(tenant: string): Promise<AuditHead | undefined>;
}

export interface AuditRepository extends AuditReader {
  /**
   * Appends the draft to the tenant's hash chain (`sealAuditRecord` of control-plane/audit/chain.ts
   * gives it its sequence number and hashes). Appends of one tenant are serialised across
   * transactions and processes; within a transaction they are chained in call order. A backend
   * may seal them when the transaction commits, after its other writes.
   */
  append(tenant: string, draft: AuditDraft): Promise<void>;
}

export interface EventFilter {
  envelopeId?: string | undefined;
  /** An exact event type, or a family: `llm.*`. */
  eventType?: string | undefined;
}

export interface EventReader {
  get(tenant: string, eventId: string): Promise<StoredEvent | undefined>;
  /**
   * Newest first by arrival; a filtered page holds up to `pageSize` matching events, and may hold
   * fewer (even none) with a token where the backend bounds the rows one page reads.
   */
  list(tenant: string, filter: EventFilter, page?: PageRequest): Promise<Page<StoredEvent>>;
}

export interface EventRepository extends EventReader {
  /**
   * Stores, in arrival order, the events whose id the tenant has not stored before (of repeats
   * within the call, the first); returns their ids. The event id is the idempotency key that
   * makes a replayed batch count once.
   */
  insertNew(tenant: string, events: readonly StoredEvent[]): Promise<string[]>;
  /**
   * Retention: removes the tenant's oldest events, in arrival order, that were received before
   * `before`, at most `limit` of them, and stops at the first one received later (arrival order is
   * received order up to the clock skew of replicas). How many it removed.
   */
  removeReceivedBefore(tenant: string, before: string, limit: number): Promise<number>;
}

export interface LeaseReader {
  get(tenant: string, budgetId: string, leaseId: string): Promise<LeaseRecord | undefined>;
  /** The sum of the budget's leases expiring after `now`, leaving out `exceptLeaseId`. */
  outstanding(tenant: string, budgetId: string, now: string, exceptLeaseId?: string | null): Promise<Spend>;
  /** Whether any lease of the budget expires after `now`, whatever it holds (an unlimited one too). */
  held(tenant: string, budgetId: string, now: string): Promise<boolean>;
  /**
   * Spend proxies reported out of their leases in the period starting `periodStart` and the event
   * processor has not applied to the budget yet (reported minus applied, never below zero).
   */
  pendingSpend(tenant: string, budgetId: string, periodStart: string): Promise<Spend>;
  /** The last report counted of each holder on the budget, by holder. */
  reports(tenant: string, budgetId: string): Promise<LeaseReport[]>;
}

export interface LeaseRepository extends LeaseReader {
  /** Stores or replaces the lease (by budget and lease id). */
  put(tenant: string, lease: LeaseRecord): Promise<void>;
  remove(tenant: string, budgetId: string, leaseId: string): Promise<void>;
  /**
   * Adds to the spend reported (`reported`) or applied (`applied`) in the period starting
   * `periodStart`; totals of another period are reset first.
   */
  addSpend(
    tenant: string,
    budgetId: string,
    periodStart: string,
    side: 'reported' | 'applied',
    spend: Spend,
  ): Promise<void>;
  /**
   * Records that the holder's report numbered `seq` on the budget is counted; false, and nothing
   * written, when that report or a later one of the holder already was (a report sent again).
   * Holders' numbers are kept after their leases end, as a report can arrive late, until retention
   * removes those counted before its cutoff (`removeReportsBefore`).
   */
  claimReport(tenant: string, budgetId: string, holder: string, seq: number, at: string): Promise<boolean>;
  /**
   * Retention: removes, of a slice of at most `limit` of the tenant's leases starting after
   * `after` (null: from the first), those that expired before `before`. A slice bounds the time
   * one transaction holds the store's writer however many leases live. PostgreSQL deletes over its
   * `(tenant_id, expires_at)` index, where what remains always starts at the oldest, so its slices
   * do not need `after`.
   */
  removeExpiredBefore(tenant: string, before: string, after: string | null, limit: number): Promise<RemovedSlice>;
  /** Retention: as `removeExpiredBefore`, the tenant's report numbers last counted before `before`. */
  removeReportsBefore(tenant: string, before: string, after: string | null, limit: number): Promise<RemovedSlice>;
}

/** What one slice of a retention walk removed, and where the next one starts (null: the walk is done). */
export interface RemovedSlice {
  removed: number;
  next: string | null;
}

/** Which approvals a list holds: those of one status, or every one. */
export interface ApprovalListFilter {
  status?: ApprovalStatus | undefined;
}

export interface ApprovalReader {
  get(tenant: string, approvalId: string): Promise<Approval | undefined>;
  /** By approval id; one status's list reads only that status's approvals (an index on both backends). */
  list(tenant: string, filter: ApprovalListFilter, page?: PageRequest): Promise<Page<Approval>>;
}

/** The fields a decision sets; `review_note` absent means none. */
export type ApprovalDecisionFields = Pick<Approval, 'status' | 'decided_at' | 'reviewer_id' | 'review_note'>;

export interface ApprovalRepository extends ApprovalReader {
  /** SVC-SYS-9008 (field `approval_id`) when the id is taken. */
  insert(tenant: string, approval: Approval): Promise<void>;
  /**
   * Records the decision if the approval is still PENDING (compare and set), so of two concurrent
   * reviewers exactly one decides: the approval after, or undefined when it is absent or was
   * decided meanwhile.
   */
  decide(tenant: string, approvalId: string, decision: ApprovalDecisionFields): Promise<Approval | undefined>;
}

export interface DetectionFilter {
  envelopeId?: string | undefined;
  executionId?: string | undefined;
  kind?: DetectionKind | undefined;
  /** Recorded at or after (ISO-8601). */
  since?: string | undefined;
  /** Recorded before (ISO-8601). */
  until?: string | undefined;
}

export interface DetectionReader {
  /**
   * Newest first (by the time the control plane recorded it, then id); a filtered page holds up to
   * `pageSize` matching detections, and may hold fewer (even none) with a token where the backend
   * bounds the rows one page reads.
   */
  list(tenant: string, filter: DetectionFilter, page?: PageRequest): Promise<Page<ImmuneDetection>>;
}

export interface DetectionRepository extends DetectionReader {
  /** Stores the detection unless its id is stored already (a replay): true when it was new. */
  insert(tenant: string, detection: ImmuneDetection): Promise<boolean>;
  /** Removes up to `limit` of the oldest detections recorded before `before` (retention); how many went. */
  removeDetectedBefore(tenant: string, before: string, limit: number): Promise<number>;
}

/** The order key of an envelope in the newest-first list: its creation time, then its id. */
export function envelopeTimeKey(envelope: Pick<Envelope, 'created_at' | 'envelope_id'>): string {
  return `${envelope.created_at}/${envelope.envelope_id}`;
}

/**
 * The order key of a detection: the time the control plane recorded it, then its id, so that key
 * order is time order. A key sorts below an ISO time exactly when it was recorded before it.
 */
export function detectionKey(detection: Pick<ImmuneDetection, 'recorded_at' | 'detection_id'>): string {
  return `${detection.recorded_at}/${detection.detection_id}`;
}

/** What a checkpoint query narrows to; absent or empty fields do not narrow. */
export interface CheckpointFilter {
  envelopeIds?: readonly string[] | undefined;
  executionIds?: readonly string[] | undefined;
  types?: readonly CheckpointType[] | undefined;
  /** Inclusive bounds of `created_at` (ISO date-times). */
  createdAfter?: string | undefined;
  createdBefore?: string | undefined;
  frameworkTypes?: readonly string[] | undefined;
  /** Every pair must be among the checkpoint's tags. */
  tags?: Readonly<Record<string, string>> | undefined;
  /** Inclusive bounds of `metadata.cost_snapshot_usd` and `size_bytes`. */
  minCostUsd?: number | undefined;
  maxCostUsd?: number | undefined;
  minSizeBytes?: number | undefined;
  maxSizeBytes?: number | undefined;
  /** Soft-deleted checkpoints too (a store copy); lists and queries leave them out. */
  includeDeleted?: boolean | undefined;
}

export interface CheckpointReader {
  /** Version `version` of the execution's checkpoints, soft-deleted or not. */
  get(tenant: string, executionId: string, version: number): Promise<Checkpoint | undefined>;
  /** The newest version saved under `checkpointId`, soft-deleted or not. */
  latest(tenant: string, checkpointId: string): Promise<Checkpoint | undefined>;
  /** The execution's versions that are not soft-deleted, newest first. */
  versions(tenant: string, executionId: string, page?: PageRequest): Promise<Page<Checkpoint>>;
  /**
   * The checkpoints that are not soft-deleted and match `filter`, by `created_at` in `order`
   * (ties by version, then execution id, in the same direction).
   */
  query(
    tenant: string,
    filter: CheckpointFilter,
    order: CheckpointOrder,
    page?: PageRequest,
  ): Promise<Page<Checkpoint>>;
}

export interface CheckpointRepository extends CheckpointReader {
  /**
   * Stores the checkpoint as the next version of its execution (`version: 'next'`: one above every
   * version the execution ever had, pruned and deleted ones too) or as the version it carries.
   * Returns it as stored. SVC-SYS-9008 naming `checkpoint.version` when the execution has that
   * version, or `checkpoint.checkpoint_id` when the id belongs to another execution.
   */
  insert(tenant: string, checkpoint: Checkpoint, version: 'next' | 'given'): Promise<Checkpoint>;
  /**
   * Whether the execution may take a checkpoint: it has had one (it has a version counter), or the
   * tenant has fewer than `max` executions that have. The answer holds until the transaction
   * commits: executions new to the tenant are admitted one at a time, on every replica.
   */
  admitExecution(tenant: string, executionId: string, max: number): Promise<boolean>;
  /**
   * Removes up to `limit` versions created before `before` (ISO), oldest first, and the version
   * counter of an execution left with none, which then no longer counts against the tenant's
   * executions; how many versions went.
   */
  removeCreatedBefore(tenant: string, before: string, limit: number): Promise<number>;
  /** Removes the execution's oldest versions (deleted or not) until `keep` remain; how many went. */
  prune(tenant: string, executionId: string, keep: number): Promise<number>;
  /**
   * Marks deleted (`at`; one marked already keeps its time) or removes the execution's versions
   * saved under `checkpointId`, or all of them when it is null: how many there were.
   */
  delete(
    tenant: string,
    executionId: string,
    checkpointId: string | null,
    mode: { soft: string } | 'hard',
  ): Promise<number>;
}

export interface ExecutionContextReader {
  get(tenant: string, executionId: string): Promise<ExecutionContext | undefined>;
  /** By execution id. */
  list(tenant: string, page?: PageRequest): Promise<Page<ExecutionContext>>;
}

export interface ExecutionContextRepository extends ExecutionContextReader {
  /**
   * Stores `context` if the stored version is still `expectedVersion` (0: none stored), compare
   * and set: false, nothing written, when another update came first. Of concurrent writers with one
   * expected version, across replicas, exactly one succeeds.
   */
  put(tenant: string, context: ExecutionContext, expectedVersion: number): Promise<boolean>;
  /**
   * Whether the execution may have a context: it has one, or the tenant has fewer than `max`. The
   * answer holds until the transaction commits, as `CheckpointRepository.admitExecution`.
   */
  admit(tenant: string, executionId: string, max: number): Promise<boolean>;
  /** Removes up to `limit` contexts last updated before `before` (ISO); how many went. */
  removeUpdatedBefore(tenant: string, before: string, limit: number): Promise<number>;
}

export interface OutboxRepository {
  /** Appends bus events after every committed one; they commit or roll back with the transaction. */
  append(events: readonly OutboxEvent[]): Promise<void>;
}

export interface DedupRepository {
  /** Records that message `messageId` of `scope` was handled at `at`: true the first time, false after. */
  markProcessed(tenant: string, scope: string, messageId: string, at: string): Promise<boolean>;
  /**
   * Retention: looks at up to `limit` of the scope's entries after message id `after` (null: from
   * the first), in message id order, and removes those handled before `before`. How many it
   * removed, and the last message id it looked at (null once it reached the scope's end).
   */
  removeProcessedBefore(
    tenant: string,
    scope: string,
    before: string,
    after: string | null,
    limit: number,
  ): Promise<RemovedSlice>;
}

/** Which process runs a background job (lease expiry, retention, periodic alert evaluation). */
export interface JobLeaseRepository {
  /**
   * Takes or renews job `name` for `holder` until `now + ttlMs`: true when `holder` has it now,
   * false while another holder's lease runs.
   */
  tryAcquire(name: string, holder: string, ttlMs: number, now: Date): Promise<boolean>;
  /** Gives the job up, if `holder` has it. */
  release(name: string, holder: string): Promise<void>;
}
