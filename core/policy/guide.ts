import { z } from 'zod';
import { TimestampSchema } from '../domain/timestamp.ts';
import { MAX_LIST_ITEMS, MAX_NAME_LENGTH, MAX_TEXT_LENGTH, TagsSchema, TenantIdSchema } from '../domain/bounds.ts';
import {
  EnforcementInputSchema,
  EnforcementSchema,
  PolicyStatusSchema,
  PrioritySchema,
  type Policy,
  type PolicyStatus,
} from './model.ts';
import type { RestCreatePolicyRequest } from './rest.ts';
import type { PolicyChanges } from './revise-policy.ts';
import {
  POLICY_TYPE_TAG,
  RulesObjectInputSchema,
  RulesObjectSchema,
  rulesFromObject,
  rulesToObject,
} from './rules-object.ts';

/**
 * The guides' policy shape (`/api/v1/policies`, spec 4.4: name, policy_type, a rules object,
 * enabled, priority) onto the canonical model (docs/surfaces.md).
 */

/** The concept's policy types (spec 2.6) and MCP's (spec 2.9); a label kept in `tags.policy_type`. */
export const GUIDE_POLICY_TYPES = [
  'cost_limit',
  'budget',
  'rate_limit',
  'tool_restriction',
  'model_restriction',
  'content_filter',
  'approval',
  'semantic',
  'custom',
] as const;
export const GuidePolicyTypeSchema = z.enum(GUIDE_POLICY_TYPES);
export type GuidePolicyType = z.infer<typeof GuidePolicyTypeSchema>;

const GuideRulesSchema = RulesObjectInputSchema.refine((rules) => Object.keys(rules).length > 0, {
  message: 'at least one rule is required',
});

const guideFields = {
  name: z.string().trim().min(1).max(MAX_NAME_LENGTH),
  description: z.string().max(MAX_TEXT_LENGTH),
  policy_type: GuidePolicyTypeSchema,
  rules: GuideRulesSchema,
  /** true: ACTIVE; false: DISABLED. */
  enabled: z.boolean(),
  priority: PrioritySchema,
  /** Extension, as on REST: guide policies enforce (BLOCK) unless told otherwise. */
  enforcement: EnforcementInputSchema,
  tags: TagsSchema,
};

export const GuideCreatePolicyRequestSchema = z.strictObject({
  /** Optional: the server takes the tenant from the credential. */
  tenant_id: TenantIdSchema.optional(),
  ...guideFields,
  description: guideFields.description.default(''),
  policy_type: guideFields.policy_type.default('custom'),
  enabled: guideFields.enabled.default(true),
  priority: guideFields.priority.default(100),
  enforcement: guideFields.enforcement.default('BLOCK'),
  tags: guideFields.tags.default({}),
});
export type GuideCreatePolicyRequest = z.output<typeof GuideCreatePolicyRequestSchema>;

/** The import body: the policies to create, all or none (at most MAX_LIST_ITEMS), of the caller's tenant. */
export const GuideImportRequestSchema = z
  .array(GuideCreatePolicyRequestSchema.omit({ tenant_id: true }))
  .min(1)
  .max(MAX_LIST_ITEMS);

export const GuideUpdatePolicyRequestSchema = z
  .strictObject({
    name: guideFields.name.optional(),
    description: guideFields.description.optional(),
    policy_type: guideFields.policy_type.optional(),
    rules: guideFields.rules.optional(),
    enabled: guideFields.enabled.optional(),
    priority: guideFields.priority.optional(),
    enforcement: guideFields.enforcement.optional(),
  })
  .refine((update) => Object.values(update).some((v) => v !== undefined), {
    message: 'give at least one field to change',
  });
export type GuideUpdatePolicyRequest = z.output<typeof GuideUpdatePolicyRequestSchema>;

function statusOf(enabled: boolean): PolicyStatus {
  return enabled ? 'ACTIVE' : 'DISABLED';
}

/** A guide policy as the create request the policy service takes. */
export function guideCreateRequest(request: Omit<GuideCreatePolicyRequest, 'tenant_id'>): RestCreatePolicyRequest {
  return {
    name: request.name,
    description: request.description,
    priority: request.priority,
    rules: rulesFromObject(request.rules) ?? [],
    status: statusOf(request.enabled),
    enforcement: request.enforcement,
    tags: { ...request.tags, [POLICY_TYPE_TAG]: request.policy_type },
  };
}

/** The changes an update asks for; the type is a tag, laid over the policy's other tags. */
export function guidePolicyChanges(currentTags: Policy['tags'], update: GuideUpdatePolicyRequest): PolicyChanges {
  return {
    name: update.name,
    description: update.description,
    priority: update.priority,
    rules: rulesFromObject(update.rules),
    status: update.enabled === undefined ? undefined : statusOf(update.enabled),
    enforcement: update.enforcement,
    tags: update.policy_type === undefined ? undefined : { ...currentTags, [POLICY_TYPE_TAG]: update.policy_type },
  };
}

export const GuidePolicySchema = z.object({
  policy_id: z.uuid(),
  tenant_id: z.string(),
  name: z.string(),
  description: z.string(),
  policy_type: GuidePolicyTypeSchema,
  rules: RulesObjectSchema,
  enabled: z.boolean(),
  priority: z.int(),
  /** Beyond the guides' fields: the canonical status (DRAFT reads as enabled false), enforcement, version, tags. */
  status: PolicyStatusSchema,
  enforcement: EnforcementSchema,
  version: z.int(),
  tags: z.record(z.string(), z.string()),
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
});
export type GuidePolicy = z.infer<typeof GuidePolicySchema>;

export function toGuidePolicy(p: Policy): GuidePolicy {
  const type = GuidePolicyTypeSchema.safeParse(p.tags[POLICY_TYPE_TAG]);
  return {
    policy_id: p.policy_id,
    tenant_id: p.tenant_id,
    name: p.name,
    description: p.description,
    policy_type: type.success ? type.data : 'custom',
    rules: rulesToObject(p.rules),
    enabled: p.status === 'ACTIVE',
    priority: p.priority,
    status: p.status,
    enforcement: p.enforcement,
    version: p.version,
    tags: p.tags,
    created_at: p.created_at,
    updated_at: p.updated_at,
  };
}
