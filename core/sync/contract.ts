import { z } from 'zod';
import { ActorSchema } from '../domain/audit.ts';
import { IdSchema, MAX_TOTAL, NameSchema } from '../domain/bounds.ts';
import { BudgetLimitsSchema, BudgetStatusSchema } from '../domain/budget.ts';
import { MetadataSchema } from '../domain/common.ts';
import { TimestampSchema } from '../domain/timestamp.ts';
import { EnvelopeStatusSchema } from '../domain/envelope.ts';
import { ApprovalStatusSchema } from '../policy/approvals.ts';
import { PolicySchema } from '../policy/model.ts';

/**
 * What passes between the control plane and its proxies besides the events of spec 6.2.
 * Rulesets, budget state and the holds on envelopes (paused or ended) travel in key-value buckets
 * (the last value per key, so a proxy that starts or reconnects is current at once); leases are
 * request-reply; terminations and pauses are also signalled, as the fast path. Every subject and
 * key starts with the tenant, so per-tenant credentials can fence them.
 */
export const BUCKETS = { rulesets: 'svc_rulesets', budgets: 'svc_budgets', holds: 'svc_holds' } as const;

export const keys = {
  ruleset: (tenant: string) => `ruleset.${tenant}`,
  budget: (tenant: string, budgetId: string) => `budget.${tenant}.${budgetId}`,
  budgetFilter: (tenant: string) => `budget.${tenant}.>`,
  hold: (tenant: string, envelopeId: string) => `hold.${tenant}.${envelopeId}`,
  holdFilter: (tenant: string) => `hold.${tenant}.>`,
} as const;

export const syncSubjects = {
  /** Request-reply: a proxy asks for, renews or returns a budget lease. */
  lease: (tenant: string) => `svc.${tenant}.leases.request`,
  /** Signal: end the named envelope's in-flight calls wherever they run. */
  terminate: (tenant: string) => `svc.${tenant}.signals.terminate`,
  /**
   * Signal: an envelope was paused (proxies hold its calls from then on) or runs again (they
   * release the calls they hold for it at once).
   */
  pause: (tenant: string) => `svc.${tenant}.signals.pause`,
  /**
   * Request-reply: a proxy holding a call opens its pending approval, or asks again how it
   * stands (after a lost answer, a control-plane restart, or on its periodic re-check).
   */
  approval: (tenant: string) => `svc.${tenant}.approvals.request`,
  /** Signal: an approval was decided; proxies holding a call for it release the call at once. */
  approvalDecided: (tenant: string) => `svc.${tenant}.signals.approval`,
} as const;

/** A tenant's policies as of one version; each proxy compiles them with core/policy. */
export const RulesetSnapshotSchema = z.object({
  tenant_id: z.string(),
  version: z.number().int().nonnegative(),
  policies: z.array(PolicySchema),
  published_at: TimestampSchema,
});
export type RulesetSnapshot = z.infer<typeof RulesetSnapshotSchema>;

/** A budget's state as proxies need it to refuse work early; money in micro-dollars. */
export const BudgetStateSchema = z.object({
  tenant_id: z.string(),
  budget_id: z.string(),
  /**
   * The workflow the budget is scoped to (null: none), which the proxy gives as `workflow_id` to
   * the evaluation of every call charged to it. Absent from a state an older control plane wrote:
   * the proxy then does not know it.
   */
  workflow_id: z.string().nullable().optional(),
  status: BudgetStatusSchema,
  limits: BudgetLimitsSchema,
  period_start: TimestampSchema,
  period_end: TimestampSchema.nullable(),
  used_tokens: z.number().int().nonnegative(),
  used_micros: z.number().int().nonnegative(),
  /** What is neither spent nor leased out; null when unlimited. */
  unleased_tokens: z.number().int().nullable(),
  unleased_micros: z.number().int().nullable(),
  updated_at: TimestampSchema,
});
export type BudgetState = z.infer<typeof BudgetStateSchema>;

export const LeaseRequestSchema = z.object({
  tenant_id: z.string(),
  /** Ids bounded like every id that becomes a storage key (the ledger keys reports by holder). */
  budget_id: IdSchema,
  /** Stable per proxy process; leases of a vanished holder expire. */
  holder: IdSchema,
  /** The lease being renewed or returned, if any. */
  lease_id: IdSchema.nullable().default(null),
  want_tokens: z.number().int().nonnegative(),
  want_micros: z.number().int().nonnegative(),
  /**
   * What the holder has settled out of its current lease and not reported before; exact integers,
   * which the ledger adds up to its totals' maximum.
   */
  spent_tokens: z.number().int().nonnegative().max(MAX_TOTAL).default(0),
  spent_micros: z.number().int().nonnegative().max(MAX_TOTAL).default(0),
  /**
   * The report's number, increasing per holder and budget. A request whose answer was lost is
   * sent again with the same number and amounts, and the ledger counts a number once; without it
   * (an older proxy) the spend is counted on every request.
   */
  report_seq: z.number().int().positive().nullable().default(null),
  /** Give everything back (shutdown). */
  release: z.boolean().default(false),
});
export type LeaseRequest = z.infer<typeof LeaseRequestSchema>;

export const LeaseGrantSchema = z.object({
  lease_id: z.string(),
  budget_id: z.string(),
  /** The whole lease now held (not the increment); null for an unlimited dimension. */
  tokens: z.number().int().nonnegative().nullable(),
  micros: z.number().int().nonnegative().nullable(),
  expires_at: TimestampSchema,
  /**
   * The lease's time to live from its grant. A holder counts it from when it asked, on its own
   * clock, so it stops spending the grant no later than the control plane stops counting it,
   * whatever the two clocks say. Absent from a release's answer.
   */
  ttl_ms: z.number().int().positive().optional(),
  status: BudgetStatusSchema,
});
export type LeaseGrant = z.infer<typeof LeaseGrantSchema>;

export const TerminateSignalSchema = z.object({
  tenant_id: z.string(),
  envelope_id: z.string(),
  execution_id: z.string().nullable(),
  budget_id: z.string().nullable(),
  reason: z.string(),
  force: z.boolean(),
});
export type TerminateSignal = z.infer<typeof TerminateSignalSchema>;

export const PauseSignalSchema = z.object({
  tenant_id: z.string(),
  envelope_id: z.string(),
  paused: z.boolean(),
  reason: z.string().nullable(),
});
export type PauseSignal = z.infer<typeof PauseSignalSchema>;

/**
 * How the control plane holds an envelope, kept in `svc_holds` under `hold.<tenant>.<envelope>`:
 * PAUSED (its calls wait), a final status (its calls are refused), or RUNNING again after a
 * pause (its calls go on). `written_at` lets the control plane re-write a long pause before the
 * bucket's age limit removes it.
 */
export const HoldStateSchema = z.object({
  tenant_id: z.string(),
  envelope_id: z.string(),
  execution_id: z.string(),
  /**
   * The envelope's budget, which a proxy meeting it anew charges when it may (its calls count
   * toward it only then). Absent from an older control plane's holds.
   */
  budget_id: z.string().nullable().optional(),
  status: EnvelopeStatusSchema,
  reason: z.string().nullable(),
  written_at: TimestampSchema,
});
export type HoldState = z.infer<typeof HoldStateSchema>;

/** The most of an evaluation context an approval keeps, as JSON: a quarter of NATS's payload limit. */
export const MAX_HELD_CONTEXT_BYTES = 256 * 1024;

/**
 * A proxy's call waits for an approval: opens it under the id the proxy chose (so asking again
 * never opens a second one), or reads it when it exists.
 */
export const ApprovalHoldRequestSchema = z.object({
  tenant_id: z.string(),
  approval_id: IdSchema,
  /** `proxy:<host>`: kept in the approval, bounded as a name. */
  requested_by: ActorSchema.extend({ id: NameSchema }),
  action: z.string().min(1).max(1000),
  context: MetadataSchema.refine(
    (context) => Buffer.byteLength(JSON.stringify(context)) <= MAX_HELD_CONTEXT_BYTES,
    `must take at most ${MAX_HELD_CONTEXT_BYTES} bytes as JSON`,
  ),
  envelope_id: IdSchema.nullable(),
  policy_id: z.string().max(1000),
  rule_id: z.string().max(1000),
  reason: z.string().max(10_000),
  /**
   * Set once the held call ended without a decision (its client left, its timeout passed, the
   * proxy shut down): why. A pending approval is then rejected in the proxy's name with this
   * note, so that none waits for a reviewer after its call was answered; one not opened yet is
   * stored rejected, so that an open asked for earlier and delivered later opens nothing.
   */
  withdrawn: z.string().min(1).max(1000).optional(),
});
export type ApprovalHoldRequest = z.infer<typeof ApprovalHoldRequestSchema>;

/** How an approval stands: the reply to a hold request, and the signal of a decision. */
export const ApprovalStandingSchema = z.object({
  tenant_id: z.string(),
  approval_id: z.string(),
  status: ApprovalStatusSchema,
  reviewer_id: z.string().nullable(),
  review_note: z.string().nullable(),
});
export type ApprovalStanding = z.infer<typeof ApprovalStandingSchema>;

/**
 * A proxy opened an envelope for an execution it saw first (published on
 * `svc.<tenant>.envelopes.created`); the control plane stores it if it does not know it yet.
 */
export const EnvelopeOpenedSchema = z.object({
  tenant_id: z.string(),
  /** Bounded like every id that becomes a storage key. */
  envelope_id: IdSchema,
  /** As the agent's header said it; used as a key only when it is an id. */
  execution_id: z.string(),
  budget_id: IdSchema.nullable(),
  status: z.literal('AUTHORIZED'),
  /** Kept with the envelope: bounded as over REST. */
  adapter_type: NameSchema.default('proxy'),
  source: NameSchema,
  occurred_at: TimestampSchema,
});
export type EnvelopeOpened = z.infer<typeof EnvelopeOpenedSchema>;
