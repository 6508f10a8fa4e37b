import { z } from 'zod';
import {
  IdSchema,
  MAX_LIST_ITEMS,
  MAX_NAME_LENGTH,
  MAX_PATH_ID_LENGTH,
  MetadataSchema,
  TagsSchema,
  TimestampSchema,
  UsdSchema,
} from '../../core/domain/index.ts';

/**
 * The checkpoint model of spec 2.7 (svc.checkpoint.v1): what an adapter saves to resume an
 * execution from, versioned per execution, and the execution context shared by its steps.
 */

/** Why a checkpoint was taken; MANUAL is a save the adapter asked for itself. */
export const CHECKPOINT_TYPES = ['AUTO', 'MANUAL', 'ERROR', 'PRE_TERMINATE'] as const;
export const CheckpointTypeSchema = z.enum(CHECKPOINT_TYPES);
export type CheckpointType = z.infer<typeof CheckpointTypeSchema>;

export const MERGE_STRATEGIES = ['LAST_WRITE_WINS', 'FAIL_ON_CONFLICT', 'MERGE_RECURSIVE', 'CUSTOM'] as const;
export const MergeStrategySchema = z.enum(MERGE_STRATEGIES);
export type MergeStrategy = z.infer<typeof MergeStrategySchema>;

/**
 * Spec 8 leaves the size of checkpoint data open. A checkpoint travels whole in one gRPC message
 * (4 MB) or REST body (1 MiB by default), and is read back whole to resume: 1 MiB of JSON keeps
 * both within those bounds with room for the rest of the message.
 */
export const MAX_CHECKPOINT_DATA_BYTES = 1_048_576;
/** The execution context as stored after an update, as JSON. */
export const MAX_CONTEXT_BYTES = 1_048_576;
/** Versions are int32 on the wire. */
export const MAX_VERSION = 2_147_483_647;
/** Keys named by `keys` and `delete_keys`. */
export const MAX_CONTEXT_KEYS = 1000;

/** Ids that become path variables (`/v1/checkpoints/{execution_id}/versions`) share their bound. */
export const CheckpointIdSchema = IdSchema.pipe(z.string().max(MAX_PATH_ID_LENGTH));
export const VersionSchema = z.number().int().min(1).max(MAX_VERSION);
const LabelSchema = z.string().max(MAX_NAME_LENGTH);

export const CheckpointMetadataSchema = z.object({
  type: CheckpointTypeSchema.nullable(),
  framework_type: LabelSchema.nullable(),
  current_node: LabelSchema.nullable(),
  cost_snapshot_usd: UsdSchema,
  tags: TagsSchema,
});
export type CheckpointMetadata = z.infer<typeof CheckpointMetadataSchema>;

export const CheckpointSchema = z.object({
  checkpoint_id: CheckpointIdSchema,
  tenant_id: z.string(),
  envelope_id: CheckpointIdSchema,
  execution_id: CheckpointIdSchema,
  version: VersionSchema,
  metadata: CheckpointMetadataSchema,
  data: MetadataSchema,
  /** `data` as UTF-8 JSON. */
  size_bytes: z.number().int().nonnegative(),
  created_at: z.string(),
  /** Set by a soft delete: lists and queries leave the checkpoint out, a lookup by id shows it. */
  deleted_at: z.string().nullable(),
});
export type Checkpoint = z.infer<typeof CheckpointSchema>;

/** A save: the checkpoint as the adapter gives it, and how its execution keeps versions. */
export const SaveCheckpointInputSchema = z.object({
  checkpoint: z.object({
    /** Generated when absent. */
    checkpoint_id: CheckpointIdSchema.optional(),
    envelope_id: CheckpointIdSchema,
    execution_id: CheckpointIdSchema,
    /** Required unless `auto_version`, which ignores it. */
    version: z.number().int().min(0).max(MAX_VERSION),
    metadata: CheckpointMetadataSchema,
    data: MetadataSchema,
  }),
  auto_version: z.boolean(),
  /** 0: every version is kept (spec 8). */
  max_versions: z.number().int().min(0).max(MAX_VERSION),
});
export type SaveCheckpointInput = z.infer<typeof SaveCheckpointInputSchema>;

const IdListSchema = z.array(CheckpointIdSchema).max(MAX_LIST_ITEMS);

/** CheckpointQuery of spec 4.6: every field narrows; lists match any value, tags all pairs. */
export const CheckpointQuerySchema = z
  .object({
    tenant_ids: z.array(z.string().max(MAX_NAME_LENGTH)).max(MAX_LIST_ITEMS),
    envelope_ids: IdListSchema,
    execution_ids: IdListSchema,
    types: z.array(CheckpointTypeSchema).max(CHECKPOINT_TYPES.length),
    created_after: TimestampSchema.optional(),
    created_before: TimestampSchema.optional(),
    framework_types: z.array(LabelSchema).max(MAX_LIST_ITEMS),
    tags: TagsSchema,
    min_cost_usd: UsdSchema.optional(),
    max_cost_usd: UsdSchema.optional(),
    min_size_bytes: z.number().int().nonnegative().optional(),
    max_size_bytes: z.number().int().nonnegative().optional(),
  })
  .superRefine((q, ctx) => {
    if (q.min_cost_usd !== undefined && q.max_cost_usd !== undefined && q.min_cost_usd > q.max_cost_usd)
      ctx.addIssue({ code: 'custom', path: ['max_cost_usd'], message: 'must not be below min_cost_usd' });
    if (q.min_size_bytes !== undefined && q.max_size_bytes !== undefined && q.min_size_bytes > q.max_size_bytes)
      ctx.addIssue({ code: 'custom', path: ['max_size_bytes'], message: 'must not be below min_size_bytes' });
    if (q.created_after !== undefined && q.created_before !== undefined && q.created_after > q.created_before)
      ctx.addIssue({ code: 'custom', path: ['created_before'], message: 'must not be before created_after' });
  });
export type CheckpointQuery = z.infer<typeof CheckpointQuerySchema>;

/** The order of lists and queries: by creation, newest first unless asked. */
export type CheckpointOrder = 'created_at desc' | 'created_at asc';

/** Cross-step key/value state of one execution (spec 2.7), versioned for optimistic locking. */
export const ExecutionContextSchema = z.object({
  execution_id: CheckpointIdSchema,
  tenant_id: z.string(),
  values: MetadataSchema,
  /** 0 before the first update; each update adds one. */
  version: z.number().int().nonnegative(),
  updated_at: z.string().nullable(),
});
export type ExecutionContext = z.infer<typeof ExecutionContextSchema>;

const ContextKeysSchema = z.array(z.string().max(MAX_NAME_LENGTH)).max(MAX_CONTEXT_KEYS);

export const UpdateExecutionContextInputSchema = z.object({
  execution_id: CheckpointIdSchema,
  updates: MetadataSchema,
  delete_keys: ContextKeysSchema,
  /** When set, the update applies only if the stored version is this (0: no context yet). */
  expected_version: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
  merge_strategy: MergeStrategySchema,
});
export type UpdateExecutionContextInput = z.infer<typeof UpdateExecutionContextInputSchema>;

export const GetExecutionContextInputSchema = z.object({
  execution_id: CheckpointIdSchema,
  keys: ContextKeysSchema,
  include_inherited: z.boolean(),
});
export type GetExecutionContextInput = z.infer<typeof GetExecutionContextInputSchema>;

/** UTF-8 bytes of a value as JSON: how sizes are measured and bounded. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}
