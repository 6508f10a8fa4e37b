import { z } from 'zod';
import { MAX_KEY_LIFETIME_SECONDS, MAX_LIST_ITEMS, NameSchema, TenantIdSchema } from './bounds.ts';
import { TimestampSchema } from './timestamp.ts';

/** Scopes of spec 2.8. `admin` grants every scope within the key's tenant. */
export const ScopeSchema = z.enum([
  'envelopes:read',
  'envelopes:write',
  'policies:read',
  'policies:write',
  'budgets:read',
  'budgets:write',
  'checkpoints:read',
  'checkpoints:write',
  'events:read',
  'admin',
]);
export type Scope = z.infer<typeof ScopeSchema>;
export const ALL_SCOPES = ScopeSchema.options;

/** The tenant that platform administrators belong to; its admin keys may act for any tenant. */
export const SYSTEM_TENANT = 'system';

export const TenantSchema = z.object({
  tenant_id: TenantIdSchema,
  name: z.string(),
  created_at: TimestampSchema,
  /** Features the tenant's admin switched off for it (`PATCH /api/v1/features/{name}`); absent: none. */
  disabled_features: z.array(z.string()).optional(),
});
export type Tenant = z.infer<typeof TenantSchema>;

export const CreateTenantRequestSchema = z.strictObject({
  tenant_id: TenantIdSchema.optional(),
  name: NameSchema,
});

/** Stored API key: the secret itself is never stored, only its SHA-256. */
export const ApiKeyRecordSchema = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  key_hint: z.string(),
  key_hash: z.string(),
  scopes: z.array(ScopeSchema),
  expires_at: TimestampSchema.nullable(),
  created_at: TimestampSchema,
  revoked_at: TimestampSchema.nullable(),
  last_used_at: TimestampSchema.nullable(),
  /** The API key that created this one: revoking it revokes this key too. Absent: created otherwise. */
  created_by: z.string().optional(),
});
export type ApiKeyRecord = z.infer<typeof ApiKeyRecordSchema>;

export const CreateApiKeyRequestSchema = z.strictObject({
  name: NameSchema,
  scopes: z
    .array(ScopeSchema)
    .min(1)
    .max(MAX_LIST_ITEMS)
    .default(['envelopes:read', 'envelopes:write', 'budgets:read', 'policies:read', 'events:read']),
  expires_in_seconds: z.number().int().nonnegative().max(MAX_KEY_LIFETIME_SECONDS).default(0),
});

export const ApiKeyViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  key_hint: z.string(),
  prefix: z.string(),
  scopes: z.array(ScopeSchema),
  status: z.enum(['active', 'revoked', 'expired']),
  expires_at: TimestampSchema.nullable(),
  created_at: TimestampSchema,
  last_used_at: TimestampSchema.nullable(),
});
export type ApiKeyView = z.infer<typeof ApiKeyViewSchema>;

export const CreatedApiKeySchema = ApiKeyViewSchema.extend({ key_secret: z.string() });

/** Who is calling: the identity every service call and audit record carries. */
export interface Principal {
  type: 'api_key' | 'jwt' | 'bootstrap';
  id: string;
  /** The tenant of the credential. */
  tenant_id: string;
  scopes: ReadonlySet<Scope>;
  /** May act for any tenant (X-Tenant-ID, differing tenant_id), and create tenants. */
  administrator: boolean;
  /** When the credential lapses (a JWT's `exp`, an API key's `expires_at`): the keys it creates may not outlive it. */
  expires_at?: Date;
}
