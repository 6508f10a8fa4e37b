import { z } from 'zod';
import { IdSchema, MAX_LIST_ITEMS, MAX_NAME_LENGTH } from '../../../core/domain/index.ts';
import {
  DecisionSchema,
  EnforcementSchema,
  PolicyConditionSchema,
  RestPolicyRuleInputSchema,
  type Policy,
  type PolicyRule,
  type PolicyStatus,
} from '../../../core/policy/index.ts';

/** MCP policy shapes (spec 2.9) onto the canonical policy (docs/surfaces.md). */

export const MCP_POLICY_TYPES = ['budget', 'rate_limit', 'content_filter', 'approval', 'custom'] as const;
export const McpPolicyTypeSchema = z.enum(MCP_POLICY_TYPES);
/** The canonical model has no policy type: it is kept as this tag. */
export const POLICY_TYPE_TAG = 'policy_type';

export const McpPolicyStatusSchema = z.enum(['ACTIVE', 'INACTIVE', 'DRAFT']);
export type McpPolicyStatus = z.infer<typeof McpPolicyStatusSchema>;
const TO_CANONICAL: Record<McpPolicyStatus, PolicyStatus> = { ACTIVE: 'ACTIVE', INACTIVE: 'DISABLED', DRAFT: 'DRAFT' };

export function canonicalStatus(status: McpPolicyStatus): PolicyStatus {
  return TO_CANONICAL[status];
}

export function mcpStatus(status: PolicyStatus): McpPolicyStatus {
  return status === 'DISABLED' ? 'INACTIVE' : status;
}

export const McpPolicyNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, dashes and underscores only')
  .max(MAX_NAME_LENGTH);

/**
 * `rules` is an object keyed by rule id: each value is a rule as REST writes it (`action`,
 * `effect` or `decision`, `conditions`, `message`), in the key order given.
 */
export const McpRulesInputSchema = z
  .record(IdSchema, RestPolicyRuleInputSchema)
  .refine((rules) => Object.keys(rules).length <= MAX_LIST_ITEMS, `at most ${MAX_LIST_ITEMS} rules`)
  .meta({
    description:
      'Rules keyed by rule id, evaluated in key order: {"no-shell": {"action": "tool:shell", "effect": "deny", "conditions": []}}',
  });

/** The canonical rules of an MCP `rules` object (undefined when none were given). */
export function rulesFromMcp(rules: z.output<typeof McpRulesInputSchema> | undefined): PolicyRule[] | undefined {
  if (rules === undefined) return undefined;
  return Object.entries(rules).map(([ruleId, rule]) => ({
    rule_id: ruleId,
    name: rule.name ?? ruleId,
    action: rule.action,
    decision: rule.decision,
    conditions: rule.conditions,
    ...(rule.message === undefined ? {} : { message: rule.message }),
  }));
}

const McpRuleSchema = z.object({
  name: z.string(),
  action: z.string(),
  decision: DecisionSchema,
  conditions: z.array(PolicyConditionSchema),
  message: z.string().optional(),
});

export const McpPolicySchema = z.object({
  id: z.string(),
  name: z.string(),
  type: McpPolicyTypeSchema,
  status: McpPolicyStatusSchema,
  priority: z.int(),
  description: z.string(),
  rules: z.record(z.string(), McpRuleSchema),
  enforcement: EnforcementSchema,
  version: z.int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type McpPolicy = z.infer<typeof McpPolicySchema>;

export function toMcpPolicy(p: Policy): McpPolicy {
  const type = McpPolicyTypeSchema.safeParse(p.tags[POLICY_TYPE_TAG]);
  return {
    id: p.policy_id,
    name: p.name,
    type: type.success ? type.data : 'custom',
    status: mcpStatus(p.status),
    priority: p.priority,
    description: p.description,
    rules: Object.fromEntries(
      p.rules.map((r) => [
        r.rule_id,
        {
          name: r.name,
          action: r.action,
          decision: r.decision,
          conditions: r.conditions,
          ...(r.message === undefined ? {} : { message: r.message }),
        },
      ]),
    ),
    enforcement: p.enforcement,
    version: p.version,
    created_at: p.created_at,
    updated_at: p.updated_at,
  };
}
