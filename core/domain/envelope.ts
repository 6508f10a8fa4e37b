import { z } from 'zod';
import { IdSchema, MAX_COUNT, MAX_LIST_ITEMS, MAX_TIMEOUT_SECONDS, MAX_USD } from './bounds.ts';
import { MetadataSchema, UuidSchema } from './common.ts';
import { TimestampSchema } from './timestamp.ts';

/** Canonical envelope statuses (ARCHITECTURE §4). REST folds the last three into TERMINATED. */
export const EnvelopeStatusSchema = z.enum([
  'PENDING',
  'AUTHORIZED',
  'RUNNING',
  'PAUSED',
  'COMPLETED',
  'FAILED',
  'TERMINATED',
  'BUDGET_EXCEEDED',
  'POLICY_VIOLATION',
  'TIMEOUT',
]);
export type EnvelopeStatus = z.infer<typeof EnvelopeStatusSchema>;

export const RestEnvelopeStateSchema = z.enum([
  'PENDING',
  'AUTHORIZED',
  'RUNNING',
  'PAUSED',
  'COMPLETED',
  'FAILED',
  'TERMINATED',
]);
export type RestEnvelopeState = z.infer<typeof RestEnvelopeStateSchema>;

export const FINAL_STATUSES: ReadonlySet<EnvelopeStatus> = new Set([
  'COMPLETED',
  'FAILED',
  'TERMINATED',
  'BUDGET_EXCEEDED',
  'POLICY_VIOLATION',
  'TIMEOUT',
]);
const TERMINATED_FAMILY: ReadonlySet<EnvelopeStatus> = new Set([
  'TERMINATED',
  'BUDGET_EXCEEDED',
  'POLICY_VIOLATION',
  'TIMEOUT',
]);

export function isFinal(status: EnvelopeStatus): boolean {
  return FINAL_STATUSES.has(status);
}

export function isTerminated(status: EnvelopeStatus): boolean {
  return TERMINATED_FAMILY.has(status);
}

/**
 * Moves UpdateEnvelopeStatus may make (spec 3.1). Every non-final status may also end as FAILED
 * (a client completes its envelope as FAILED after a terminal error), TIMEOUT, or one of the
 * terminated family through termination; those are allowed from any non-final status.
 */
const EXPLICIT_MOVES: Readonly<Partial<Record<EnvelopeStatus, readonly EnvelopeStatus[]>>> = {
  PENDING: ['AUTHORIZED'],
  AUTHORIZED: ['RUNNING', 'PAUSED'],
  RUNNING: ['COMPLETED', 'PAUSED'],
  PAUSED: ['RUNNING'],
};
const FROM_ANY_NON_FINAL: readonly EnvelopeStatus[] = [
  'FAILED',
  'TIMEOUT',
  'TERMINATED',
  'BUDGET_EXCEEDED',
  'POLICY_VIOLATION',
];

export function canTransition(from: EnvelopeStatus, to: EnvelopeStatus): boolean {
  if (isFinal(from)) return false;
  return (EXPLICIT_MOVES[from]?.includes(to) ?? false) || FROM_ANY_NON_FINAL.includes(to);
}

export const TerminationReasonSchema = z.enum(['manual', 'budget_exceeded', 'policy_violation', 'timeout']);

export const GovernanceContextSchema = z.object({
  token_limit: z.number().int().nonnegative().max(MAX_COUNT).nullable().default(null),
  cost_limit_usd: z.number().nonnegative().max(MAX_USD).nullable().default(null),
  timeout_seconds: z.number().int().positive().max(MAX_TIMEOUT_SECONDS).nullable().default(null),
  policy_set: z.array(IdSchema).max(MAX_LIST_ITEMS).default([]),
});
export type GovernanceContext = z.infer<typeof GovernanceContextSchema>;

export const ModelCostSchema = z.object({
  model_id: z.string(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  cost_micros: z.number().int(),
  call_count: z.number().int(),
});

/** Canonical cost summary; cost kept in micro-dollars. */
export const CostTotalsSchema = z.object({
  tokens_input: z.number().int().nonnegative(),
  tokens_output: z.number().int().nonnegative(),
  cost_micros: z.number().int().nonnegative(),
  llm_calls: z.number().int().nonnegative(),
  tool_calls: z.number().int().nonnegative(),
  model_costs: z.array(ModelCostSchema),
});
export type CostTotals = z.infer<typeof CostTotalsSchema>;

/**
 * The most models an envelope's costs name one by one; calls to any model past them are kept
 * together under `OTHER_MODELS`. Every charge rewrites an envelope's costs on LMDB, and each
 * model is a row on PostgreSQL: the number of models an agent may name is not theirs to set.
 */
export const MAX_MODELS_PER_ENVELOPE = 64;
export const OTHER_MODELS = 'other';

/** The name under which an envelope whose costs name `charged` keeps a call to `model`. */
export function modelCostId(charged: CostTotals['model_costs'], model: string): string {
  if (charged.length < MAX_MODELS_PER_ENVELOPE - 1 || charged.some((m) => m.model_id === model)) return model;
  return OTHER_MODELS;
}

export function emptyCostTotals(): CostTotals {
  return { tokens_input: 0, tokens_output: 0, cost_micros: 0, llm_calls: 0, tool_calls: 0, model_costs: [] };
}

/** The canonical, stored envelope. */
export const EnvelopeSchema = z.object({
  envelope_id: UuidSchema,
  tenant_id: z.string(),
  budget_id: z.string().nullable(),
  execution_id: z.string(),
  adapter_type: z.string(),
  native_ref: z.string().nullable(),
  checkpoint_id: z.string().nullable(),
  status: EnvelopeStatusSchema,
  status_reason: z.string().nullable(),
  governance: GovernanceContextSchema,
  metadata: MetadataSchema,
  cost: CostTotalsSchema,
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
  completed_at: TimestampSchema.nullable(),
});
export type Envelope = z.infer<typeof EnvelopeSchema>;
