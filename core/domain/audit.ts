import { z } from 'zod';
import { MAX_NAME_LENGTH } from './bounds.ts';
import { MetadataSchema } from './common.ts';
import { TimestampSchema } from './timestamp.ts';

export const ActorSchema = z.object({
  type: z.enum(['api_key', 'jwt', 'bootstrap', 'system', 'proxy']),
  id: z.string(),
});
export type Actor = z.infer<typeof ActorSchema>;

/** Audit record of spec 2.10 plus its place in the tenant's hash chain. */
export const AuditRecordSchema = z.object({
  audit_id: z.string(),
  seq: z.number().int().positive(),
  timestamp: TimestampSchema,
  tenant_id: z.string(),
  actor: ActorSchema,
  action: z.string(),
  resource: z.object({ type: z.string(), id: z.string() }),
  result: z.string(),
  metadata: MetadataSchema,
  prev_hash: z.string(),
  hash: z.string(),
});
export type AuditRecord = z.infer<typeof AuditRecordSchema>;

export const AuditQuerySchema = z.object({
  action: z.string().max(MAX_NAME_LENGTH).optional(),
  resource_type: z.string().max(MAX_NAME_LENGTH).optional(),
  resourceType: z.string().max(MAX_NAME_LENGTH).optional(),
  actor_id: z.string().max(MAX_NAME_LENGTH).optional(),
  actorId: z.string().max(MAX_NAME_LENGTH).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
