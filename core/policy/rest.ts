import { z } from 'zod';
import { TimestampSchema } from '../domain/timestamp.ts';
import { JsonValueSchema, MetadataSchema } from '../domain/common.ts';
import {
  IdSchema,
  MAX_LIST_ITEMS,
  MAX_NAME_LENGTH,
  MAX_TEXT_LENGTH,
  NameSchema,
  TagsSchema,
  TenantIdSchema,
} from '../domain/bounds.ts';
import { compilePolicy } from './compile-policy.ts';
import {
  DecisionInputSchema,
  EnforcementInputSchema,
  EnforcementSchema,
  OperatorInputSchema,
  OperatorSchema,
  PolicyStatusInputSchema,
  PolicyStatusSchema,
  PrioritySchema,
  DecisionSchema,
  type Policy,
  type PolicyRule,
} from './model.ts';
import { EffectSchema, PolicyWarningSchema, SemanticFindingSchema, type EvaluationResult } from './result.ts';

/** REST contract codec (spec 2.5) onto the canonical model; extensions are marked as such. */

export const RestEffectSchema = z.enum(['allow', 'deny', 'warn', 'require_approval']);
export type RestEffect = z.infer<typeof RestEffectSchema>;

export const RestPolicyConditionInputSchema = z.strictObject({
  field: NameSchema,
  operator: OperatorInputSchema,
  value: JsonValueSchema,
});

export const RestPolicyRuleInputSchema = z
  .strictObject({
    rule_id: IdSchema.optional(),
    name: z.string().max(MAX_NAME_LENGTH).optional(),
    action: z.string().max(MAX_NAME_LENGTH),
    /** REST `allow|deny` (warn and require_approval are extensions). */
    effect: DecisionInputSchema.optional(),
    /** Canonical/gRPC-like rules carry `decision` instead of `effect`. */
    decision: DecisionInputSchema.optional(),
    conditions: z.array(RestPolicyConditionInputSchema).max(MAX_LIST_ITEMS).default([]),
    message: z.string().max(MAX_TEXT_LENGTH).optional(),
  })
  .transform(({ effect, decision, ...rule }, ctx) => {
    if (effect !== undefined && decision !== undefined && effect !== decision) {
      ctx.addIssue({ code: 'custom', path: ['decision'], message: 'effect and decision disagree' });
      return z.NEVER;
    }
    const chosen = decision ?? effect;
    if (chosen === undefined) {
      ctx.addIssue({ code: 'custom', path: ['effect'], message: 'effect (or decision) is required' });
      return z.NEVER;
    }
    return { ...rule, decision: chosen };
  });

export const RestCreatePolicyRequestSchema = z
  .strictObject({
    /** Optional here: the server takes the tenant from the credential. */
    tenant_id: TenantIdSchema.optional(),
    name: z.string().trim().min(1).max(MAX_NAME_LENGTH),
    description: z.string().max(MAX_TEXT_LENGTH).default(''),
    rules: z.array(RestPolicyRuleInputSchema).min(1).max(MAX_LIST_ITEMS),
    priority: PrioritySchema.default(100),
    /** Extension: REST `enabled` maps onto status ACTIVE/DISABLED. */
    enabled: z.boolean().optional(),
    /** Extension; REST-created policies enforce (BLOCK) unless told otherwise. */
    enforcement: EnforcementInputSchema.default('BLOCK'),
    /** Extension; wins over `enabled` (which must then agree with it). */
    status: PolicyStatusInputSchema.optional(),
    tags: TagsSchema.default({}),
  })
  .superRefine((req, ctx) => {
    if (req.enabled !== undefined && req.status !== undefined && req.enabled !== (req.status === 'ACTIVE')) {
      ctx.addIssue({
        code: 'custom',
        path: ['enabled'],
        message: `enabled=${String(req.enabled)} contradicts status ${req.status}`,
      });
    }
  });
export type RestCreatePolicyRequest = z.infer<typeof RestCreatePolicyRequestSchema>;

export interface PolicyCreation {
  /** The tenant the caller's credential resolves to (after any administrator override). */
  readonly tenantId: string;
  readonly policyId: string;
  readonly now: Date;
}

/** Builds a canonical policy (version 1) and compiles it, refusing it with SVC-POL-2003 if it cannot run. */
export function policyFromRestCreate(req: RestCreatePolicyRequest, creation: PolicyCreation): Policy {
  const at = creation.now.toISOString();
  const rules = req.rules.map((rule, i): PolicyRule => {
    return {
      rule_id: rule.rule_id ?? `rule-${i + 1}`,
      name: rule.name ?? `${rule.decision.toLowerCase()} ${rule.action}`,
      action: rule.action,
      decision: rule.decision,
      conditions: rule.conditions,
      ...(rule.message === undefined ? {} : { message: rule.message }),
    };
  });
  const policy: Policy = {
    policy_id: creation.policyId,
    tenant_id: creation.tenantId,
    name: req.name,
    description: req.description,
    priority: req.priority,
    status: req.status ?? (req.enabled === false ? 'DISABLED' : 'ACTIVE'),
    enforcement: req.enforcement,
    rules,
    tags: req.tags,
    version: 1,
    created_at: at,
    updated_at: at,
  };
  compilePolicy(policy);
  return policy;
}

export const RestPolicyRuleSchema = z.object({
  action: z.string(),
  effect: RestEffectSchema,
  conditions: z.array(z.object({ field: z.string(), operator: OperatorSchema, value: z.unknown() })),
  /** Extensions: the rule's identity, as named by `matched_rule`. */
  rule_id: z.string(),
  name: z.string(),
  message: z.string().optional(),
});

export const RestPolicySchema = z.object({
  policy_id: z.uuid(),
  tenant_id: z.string(),
  name: z.string(),
  description: z.string(),
  rules: z.array(RestPolicyRuleSchema),
  priority: z.int(),
  enabled: z.boolean(),
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
  /** Extensions beyond the REST contract. */
  status: PolicyStatusSchema,
  enforcement: EnforcementSchema,
  version: z.int(),
  tags: z.record(z.string(), z.string()),
});
export type RestPolicy = z.infer<typeof RestPolicySchema>;

export function toRestPolicy(p: Policy): RestPolicy {
  return {
    policy_id: p.policy_id,
    tenant_id: p.tenant_id,
    name: p.name,
    description: p.description,
    rules: p.rules.map((r) => ({
      action: r.action,
      effect: r.decision.toLowerCase() as RestEffect,
      conditions: r.conditions.map((c) => ({ field: c.field, operator: c.operator, value: c.value })),
      rule_id: r.rule_id,
      name: r.name,
      ...(r.message === undefined ? {} : { message: r.message }),
    })),
    priority: p.priority,
    enabled: p.status === 'ACTIVE',
    created_at: p.created_at,
    updated_at: p.updated_at,
    status: p.status,
    enforcement: p.enforcement,
    version: p.version,
    tags: p.tags,
  };
}

export const RestPolicyEvaluationRequestSchema = z.strictObject({
  /** Optional here: the server takes the tenant from the credential. */
  tenant_id: TenantIdSchema.optional(),
  action: NameSchema,
  envelope_id: z.uuid().optional(),
  /** Policy ids or names; empty means all the tenant's policies. */
  policy_set: z.array(z.string().max(MAX_NAME_LENGTH)).max(MAX_LIST_ITEMS).optional(),
  context: MetadataSchema.default({}),
});
export type RestPolicyEvaluationRequest = z.infer<typeof RestPolicyEvaluationRequestSchema>;

export const RestPolicyEvaluationResultSchema = z.object({
  allowed: z.boolean(),
  effect: EffectSchema,
  matched_policy: z.string().nullable(),
  matched_rule: z.string().nullable(),
  reason: z.string(),
  evaluation_time_ms: z.number(),
  /** Extensions: the canonical decision (WARN, REQUIRE_APPROVAL) and the warnings recorded. */
  decision: DecisionSchema,
  warnings: z.array(PolicyWarningSchema),
  /** Extension: what the Semantic Judge found when a SEMANTIC condition decided. */
  semantic: SemanticFindingSchema.optional(),
  /** Extension: the category of the sequence condition that decided. */
  sequence: z.object({ category: z.string() }).optional(),
});
export type RestPolicyEvaluationResult = z.infer<typeof RestPolicyEvaluationResultSchema>;

export function toRestEvaluationResult(result: EvaluationResult): RestPolicyEvaluationResult {
  return {
    allowed: result.allowed,
    effect: result.effect,
    matched_policy: result.matched_policy,
    matched_rule: result.matched_rule,
    reason: result.reason,
    evaluation_time_ms: result.evaluation_time_ms,
    decision: result.decision,
    warnings: result.warnings,
    ...(result.semantic === undefined ? {} : { semantic: result.semantic }),
    ...(result.sequence === undefined ? {} : { sequence: result.sequence }),
  };
}
