import { z } from 'zod';
import { JsonValueSchema } from '../domain/common.ts';
import { enumInput } from './enum-input.ts';
import { TimestampSchema } from '../domain/timestamp.ts';

/** Canonical policy model (ARCHITECTURE §4): every surface's policy maps onto these schemas. */

export const POLICY_STATUSES = ['DRAFT', 'ACTIVE', 'DISABLED'] as const;
export const PolicyStatusSchema = z.enum(POLICY_STATUSES);
export type PolicyStatus = z.infer<typeof PolicyStatusSchema>;
/** Accepts `active`, `POLICY_STATUS_ACTIVE` and MCP's `INACTIVE` (= DISABLED). */
export const PolicyStatusInputSchema = enumInput(POLICY_STATUSES, {
  prefixes: ['POLICY_STATUS_'],
  aliases: { INACTIVE: 'DISABLED' },
});

/** What a rule is for (gRPC `RuleType`, spec 2.6); the ListPolicies filter names one. */
export const RULE_TYPES = [
  'COST_LIMIT',
  'RATE_LIMIT',
  'TOOL_ALLOWLIST',
  'TOOL_DENYLIST',
  'MODEL_ALLOWLIST',
  'MODEL_DENYLIST',
  'CONTENT_FILTER',
  'HUMAN_APPROVAL',
  'SEMANTIC',
  'CUSTOM',
] as const;
export type RuleType = (typeof RULE_TYPES)[number];
export const RuleTypeInputSchema = enumInput(RULE_TYPES, { prefixes: ['RULE_TYPE_'] });

/**
 * The policies with a rule of `ruleType` (all of them when none is named). Rules hold no type in
 * this version (creating one with a type is refused), so a named type selects none: a filter the
 * store cannot apply answers nothing rather than everything.
 */
export function withRuleType<P>(policies: readonly P[], ruleType: RuleType | undefined): P[] {
  return ruleType === undefined ? [...policies] : [];
}

export const ENFORCEMENTS = ['AUDIT', 'WARN', 'BLOCK', 'TERMINATE'] as const;
export const EnforcementSchema = z.enum(ENFORCEMENTS);
export type Enforcement = z.infer<typeof EnforcementSchema>;
export const EnforcementInputSchema = enumInput(ENFORCEMENTS, { prefixes: ['ENFORCEMENT_LEVEL_'] });

export const DECISIONS = ['ALLOW', 'DENY', 'WARN', 'REQUIRE_APPROVAL'] as const;
export const DecisionSchema = z.enum(DECISIONS);
export type Decision = z.infer<typeof DecisionSchema>;
/** Accepts REST effects (`allow`), gRPC decisions (`EVALUATION_DECISION_DENY`) and action types (`ACTION_TYPE_DENY`). */
export const DecisionInputSchema = enumInput(DECISIONS, { prefixes: ['EVALUATION_DECISION_', 'ACTION_TYPE_'] });

export const OPERATORS = [
  'eq',
  'neq',
  'gt',
  'gte',
  'lt',
  'lte',
  'in',
  'not_in',
  'matches',
  'contains',
  'semantic',
  'sequence',
] as const;
export const OperatorSchema = z.enum(OPERATORS);
export type Operator = z.infer<typeof OperatorSchema>;
/** Accepts the REST names, the concept names (EQUALS, REGEX, ...) and `CONDITION_OPERATOR_*`. */
export const OperatorInputSchema = enumInput(OPERATORS, {
  prefixes: ['CONDITION_OPERATOR_'],
  lowerCase: true,
  aliases: {
    EQUALS: 'EQ',
    EQUAL: 'EQ',
    NOT_EQUALS: 'NEQ',
    NOT_EQUAL: 'NEQ',
    REGEX: 'MATCHES',
    GREATER_THAN: 'GT',
    GREATER_THAN_OR_EQUAL: 'GTE',
    GREATER_THAN_OR_EQUALS: 'GTE',
    LESS_THAN: 'LT',
    LESS_THAN_OR_EQUAL: 'LTE',
    LESS_THAN_OR_EQUALS: 'LTE',
  },
});

export const PolicyConditionSchema = z.object({
  /** Dotted path into the evaluation context, e.g. `request.model`. */
  field: z.string().min(1),
  operator: OperatorSchema,
  value: JsonValueSchema,
});
export type PolicyCondition = z.infer<typeof PolicyConditionSchema>;

export const PolicyRuleSchema = z.object({
  rule_id: z.string().min(1),
  name: z.string(),
  /** Action pattern with `*` wildcards: `tool:*`, `llm:gpt-4*`, `execution:start`. */
  action: z.string().min(1),
  decision: DecisionSchema,
  conditions: z.array(PolicyConditionSchema),
  message: z.string().optional(),
});
export type PolicyRule = z.infer<typeof PolicyRuleSchema>;

export const PRIORITY_MIN = 1;
export const PRIORITY_MAX = 1000;
export const PrioritySchema = z.int().min(PRIORITY_MIN).max(PRIORITY_MAX);

export const PolicySchema = z.object({
  policy_id: z.uuid(),
  tenant_id: z.string().min(1),
  name: z.string().min(1),
  description: z.string().default(''),
  /** Higher evaluates first. */
  priority: PrioritySchema,
  status: PolicyStatusSchema,
  enforcement: EnforcementSchema,
  rules: z.array(PolicyRuleSchema).min(1),
  tags: z.record(z.string(), z.string()),
  /** Bumped on every update; rulesets are compiled per version. */
  version: z.int().min(1),
  created_at: TimestampSchema,
  updated_at: TimestampSchema,
});
export type Policy = z.infer<typeof PolicySchema>;
