import { z } from 'zod';
import {
  IdSchema,
  MAX_EVENT_COST_USD,
  MAX_EVENT_TOKENS,
  MAX_LIST_ITEMS,
  MAX_NAME_LENGTH,
  MAX_TEXT_LENGTH,
  NameSchema,
  TenantIdSchema,
} from './bounds.ts';
import { microsToUsd, MetadataSchema, UuidSchema } from './common.ts';
import { TimestampSchema } from './timestamp.ts';
import {
  EnvelopeStatusSchema,
  GovernanceContextSchema,
  RestEnvelopeStateSchema,
  TerminationReasonSchema,
  isTerminated,
  type Envelope,
  type EnvelopeStatus,
  type RestEnvelopeState,
} from './envelope.ts';

const AdapterTypeSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'must be a lower-case adapter name such as langchain, a2a_proxy or custom');

/**
 * POST /v1/envelopes. Accepts the REST contract (spec 2.1) and the gRPC shape (spec 2.2): tenant_id
 * may be left out (it comes from the credential), budget_id is optional for gRPC-style callers.
 * Extensions: execution_id, governance_context limits.
 */
export const CreateEnvelopeRequestSchema = z.strictObject({
  tenant_id: TenantIdSchema.optional(),
  budget_id: UuidSchema.optional(),
  adapter_type: AdapterTypeSchema,
  execution_id: IdSchema.optional(),
  policy_set: z.array(IdSchema).max(MAX_LIST_ITEMS).optional(),
  metadata: MetadataSchema.optional(),
  governance_context: GovernanceContextSchema.partial().omit({ policy_set: true }).optional(),
  native_ref: z.string().max(MAX_TEXT_LENGTH).optional(),
});
export type CreateEnvelopeRequest = z.infer<typeof CreateEnvelopeRequestSchema>;

export const EventTypeSchema = z
  .string()
  .max(MAX_NAME_LENGTH)
  .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, 'must be dotted words such as llm.call or tool.invoke');

/**
 * EventRecord (spec 2.1). The spec leaves the nesting of model, cost_usd and payload open: they sit
 * beside tokens at the top level. event_id is an optional idempotency key (a replay counts once).
 */
export const EventRecordSchema = z.strictObject({
  event_id: IdSchema.optional(),
  event_type: EventTypeSchema,
  timestamp: TimestampSchema,
  tokens: z
    .strictObject({
      input: z.number().int().nonnegative().max(MAX_EVENT_TOKENS).default(0),
      output: z.number().int().nonnegative().max(MAX_EVENT_TOKENS).default(0),
    })
    .optional(),
  model: NameSchema.optional(),
  cost_usd: z.number().nonnegative().max(MAX_EVENT_COST_USD).optional(),
  payload: MetadataSchema.optional(),
});
export type EventRecord = z.infer<typeof EventRecordSchema>;

export const TerminateRequestSchema = z.strictObject({
  reason: z.string().max(MAX_TEXT_LENGTH).optional(),
  force: z.boolean().default(false),
});

/** Status-transition route, the HTTP face of gRPC UpdateEnvelopeStatus. */
export const UpdateEnvelopeStatusRequestSchema = z.strictObject({
  status: z
    .string()
    .max(MAX_NAME_LENGTH)
    .meta({ examples: [...EnvelopeStatusSchema.options] })
    .transform((s) => s.replace(/^ENVELOPE_STATUS_/, '').toUpperCase()),
  reason: z.string().max(MAX_TEXT_LENGTH).optional(),
});

export const CostSummarySchema = z.object({
  tokens_input: z.number().int(),
  tokens_output: z.number().int(),
  tokens_total: z.number().int(),
  cost_usd: z.number(),
  llm_calls: z.number().int(),
  tool_calls: z.number().int(),
});

export const RestEnvelopeSchema = z.object({
  envelope_id: UuidSchema,
  tenant_id: z.string(),
  budget_id: z.string().nullable(),
  execution_id: z.string(),
  adapter_type: z.string(),
  state: RestEnvelopeStateSchema,
  termination_reason: TerminationReasonSchema.nullable(),
  status_reason: z.string().nullable(),
  governance_context: GovernanceContextSchema,
  cost_summary: CostSummarySchema,
  framework_context: z.object({
    adapter_type: z.string(),
    native_ref: z.string().nullable(),
    checkpoint_id: z.string().nullable(),
  }),
  metadata: MetadataSchema,
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
  completed_at: TimestampSchema.nullable(),
});
export type RestEnvelope = z.infer<typeof RestEnvelopeSchema>;

const TERMINATION_REASON = {
  TERMINATED: 'manual',
  BUDGET_EXCEEDED: 'budget_exceeded',
  POLICY_VIOLATION: 'policy_violation',
  TIMEOUT: 'timeout',
} as const;

/** A status in REST's words: the terminated family is TERMINATED with its reason (docs/surfaces.md). */
export function toRestState(status: EnvelopeStatus): Pick<RestEnvelope, 'state' | 'termination_reason'> {
  const terminated = isTerminated(status);
  return {
    state: terminated ? 'TERMINATED' : (status as RestEnvelopeState),
    termination_reason: terminated ? TERMINATION_REASON[status as keyof typeof TERMINATION_REASON] : null,
  };
}

/**
 * The details of an SVC error as a REST client reads them: the envelope status of a refusal on
 * an ended envelope (`details.state`) in REST's words, with its `termination_reason`.
 */
export function toRestErrorDetails(details: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const status = EnvelopeStatusSchema.safeParse(details.state);
  return status.success ? { ...details, ...toRestState(status.data) } : { ...details };
}

export function toRestEnvelope(e: Envelope): RestEnvelope {
  return {
    envelope_id: e.envelope_id,
    tenant_id: e.tenant_id,
    budget_id: e.budget_id,
    execution_id: e.execution_id,
    adapter_type: e.adapter_type,
    ...toRestState(e.status),
    status_reason: e.status_reason,
    governance_context: e.governance,
    cost_summary: {
      tokens_input: e.cost.tokens_input,
      tokens_output: e.cost.tokens_output,
      tokens_total: e.cost.tokens_input + e.cost.tokens_output,
      cost_usd: microsToUsd(e.cost.cost_micros),
      llm_calls: e.cost.llm_calls,
      tool_calls: e.cost.tool_calls,
    },
    framework_context: { adapter_type: e.adapter_type, native_ref: e.native_ref, checkpoint_id: e.checkpoint_id },
    metadata: e.metadata,
    created_at: e.created_at,
    updated_at: e.updated_at,
    completed_at: e.completed_at,
  };
}
