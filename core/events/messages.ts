import { z } from 'zod';
import { EnvelopeStatusSchema } from '../domain/envelope.ts';
import { EventTypeSchema } from '../domain/envelope-rest.ts';
import {
  IdSchema,
  MAX_ID_LENGTH,
  MAX_NAME_LENGTH,
  MAX_TEXT_LENGTH,
  NameSchema,
  ReportedUsdSchema,
} from '../domain/bounds.ts';
import { MetadataSchema } from '../domain/common.ts';
import { TimestampSchema } from '../domain/timestamp.ts';
import { ApprovalSchema } from '../policy/approvals.ts';
import { keptFinding, SemanticFindingSchema } from '../policy/result.ts';

/**
 * Payloads of the bus subjects of spec 6.2 (the spec leaves them open). Both processes parse
 * what they receive with these schemas, so a proxy and a control plane of different builds fail
 * loudly on a mismatch instead of misreading each other.
 */
export const EnvelopeLifecycleMessageSchema = z.object({
  tenant_id: z.string(),
  /** Bounded like every id that becomes a storage key. */
  envelope_id: IdSchema,
  /** As a proxy was told it (an agent's header can say anything); used as a key only when it is an id. */
  execution_id: z.string(),
  budget_id: IdSchema.nullable(),
  status: EnvelopeStatusSchema,
  /** Kept as the envelope's status reason: bounded as over REST. */
  reason: z.string().max(MAX_TEXT_LENGTH).nullable(),
  /** Terminations only: cut in-flight calls at once rather than letting the current one finish. */
  force: z.boolean().default(false),
  occurred_at: TimestampSchema,
});
export type EnvelopeLifecycleMessage = z.infer<typeof EnvelopeLifecycleMessageSchema>;

/** events.llm.*, events.tool.*, events.checkpoint.*: one metered call or step. */
export const UsageEventMessageSchema = z.object({
  /** The de-duplication key: bounded, as it becomes a storage key. */
  event_id: IdSchema,
  tenant_id: z.string(),
  envelope_id: IdSchema,
  budget_id: IdSchema.nullable().default(null),
  /** Bounded as over REST, like the model and the source: each is kept in an index of the store. */
  event_type: EventTypeSchema,
  timestamp: TimestampSchema,
  tokens: z.object({ input: z.number().int().nonnegative(), output: z.number().int().nonnegative() }),
  model: NameSchema.nullable().default(null),
  cost_usd: ReportedUsdSchema.nullable().default(null),
  payload: MetadataSchema.default({}),
  /** Where it was observed: `rest` for recorded events, `proxy:<pod>` for metered calls. */
  source: NameSchema.default('rest'),
});
export type UsageEventMessage = z.infer<typeof UsageEventMessageSchema>;

export const BudgetAlertMessageSchema = z.object({
  tenant_id: z.string(),
  budget_id: z.string(),
  budget_name: z.string(),
  level: z.enum(['warning', 'exceeded']),
  threshold_percent: z.number().int(),
  action: z.enum(['notify', 'warn', 'terminate']),
  percent_used: z.number(),
  tokens_used: z.number().int(),
  cost_usd: z.number(),
  limits: z.object({ max_tokens: z.number().nullable(), max_cost_usd: z.number().nullable() }),
  period_start: TimestampSchema,
  period_end: TimestampSchema.nullable(),
  envelope_id: z.string().nullable(),
  occurred_at: TimestampSchema,
});
export type BudgetAlertMessage = z.infer<typeof BudgetAlertMessageSchema>;

/** `budgets.deleted`: a budget was deleted; nothing may be charged to it any more. */
export const BudgetDeletedMessageSchema = z.object({
  tenant_id: z.string(),
  budget_id: z.string(),
  budget_name: z.string(),
  occurred_at: TimestampSchema,
});
export type BudgetDeletedMessage = z.infer<typeof BudgetDeletedMessageSchema>;

/** `budgets.overrun_predicted`: the Oracle's probability of an overrun crossed the threshold. */
export const BudgetOverrunPredictedMessageSchema = z.object({
  tenant_id: z.string(),
  budget_id: z.string(),
  budget_name: z.string(),
  /** The limit expected to run over: `cost_usd` or `tokens`. */
  dimension: z.enum(['cost_usd', 'tokens']),
  probability: z.number(),
  threshold: z.number(),
  limit: z.number(),
  spent: z.number(),
  expected_spend_at_end: z.number(),
  expected_exhaustion_at: TimestampSchema.nullable(),
  trend: z.string(),
  period_start: TimestampSchema,
  period_end: TimestampSchema.nullable(),
  occurred_at: TimestampSchema,
});
export type BudgetOverrunPredictedMessage = z.infer<typeof BudgetOverrunPredictedMessageSchema>;

/** Each field bounded as over REST: a proxy's denial is kept for good, in the audit chain. */
export const PolicyViolationMessageSchema = z.object({
  tenant_id: z.string(),
  /** Empty when no policy decided (a control plane's own default deny). */
  policy_id: z.string().max(MAX_ID_LENGTH),
  rule_id: z.string().max(MAX_ID_LENGTH).nullable(),
  denied_action: z.string().max(MAX_NAME_LENGTH),
  decision: NameSchema,
  envelope_id: IdSchema.nullable(),
  message: z.string().max(MAX_TEXT_LENGTH),
  occurred_at: TimestampSchema,
  /** `control-plane`, or `proxy:<pod>` for a denial at a sidecar (the control plane audits those). */
  source: NameSchema.default('control-plane'),
  /**
   * What the Semantic Judge found when a SEMANTIC condition decided: category, confidence,
   * evidence; shortened as the audit record keeps it (`keptFinding`).
   */
  semantic: SemanticFindingSchema.transform(keptFinding).optional(),
});
export type PolicyViolationMessage = z.infer<typeof PolicyViolationMessageSchema>;

/** `policies.approval.requested` and `policies.approval.decided`: the approval as it now stands. */
export const ApprovalMessageSchema = z.object({
  tenant_id: z.string(),
  approval: ApprovalSchema,
  occurred_at: TimestampSchema,
});
export type ApprovalMessage = z.infer<typeof ApprovalMessageSchema>;
