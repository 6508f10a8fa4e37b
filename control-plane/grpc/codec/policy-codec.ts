import { z } from 'zod';
import {
  RestCreatePolicyRequestSchema,
  type EvaluationResult,
  type Operator,
  type Policy,
  type RestCreatePolicyRequest,
} from '../../../core/policy/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import { MAX_LIST_ITEMS } from '../../../core/domain/bounds.ts';
import { renamedFields } from './renamed-fields.ts';
import { enumValue, fromValue, invalidField, present, toTimestamp, toValue } from './well-known.ts';

/** Canonical operators under their gRPC names (docs/surfaces.md). */
const GRPC_OPERATOR: Record<Operator, string> = {
  eq: 'EQUALS',
  neq: 'NOT_EQUALS',
  gt: 'GREATER_THAN',
  gte: 'GTE',
  lt: 'LESS_THAN',
  lte: 'LTE',
  in: 'IN',
  not_in: 'NOT_IN',
  matches: 'REGEX',
  contains: 'CONTAINS',
  semantic: 'SEMANTIC',
  sequence: 'SEQUENCE',
};

const CONDITION_TYPE: Record<Operator, string> = {
  eq: 'COMPARISON',
  neq: 'COMPARISON',
  gt: 'COMPARISON',
  gte: 'COMPARISON',
  lt: 'COMPARISON',
  lte: 'COMPARISON',
  in: 'IN_LIST',
  not_in: 'IN_LIST',
  matches: 'PATTERN',
  contains: 'PATTERN',
  semantic: 'SEMANTIC',
  sequence: 'SEQUENCE',
};

const LIST_OPERATORS: ReadonlySet<string> = new Set(['IN', 'NOT_IN']);

const OPERATOR_BY_GRPC = new Map(Object.entries(GRPC_OPERATOR).map(([canonical, grpc]) => [grpc, canonical]));

export function toGrpcPolicy(policy: Policy) {
  return {
    policy_id: policy.policy_id,
    tenant_id: policy.tenant_id,
    name: policy.name,
    description: policy.description,
    tags: policy.tags,
    rules: policy.rules.map((rule) => ({
      rule_id: rule.rule_id,
      name: rule.name,
      conditions: rule.conditions.map((c) => ({
        condition_type: `CONDITION_TYPE_${CONDITION_TYPE[c.operator]}`,
        field: c.field,
        operator: `CONDITION_OPERATOR_${GRPC_OPERATOR[c.operator]}`,
        values:
          Array.isArray(c.value) && (c.operator === 'in' || c.operator === 'not_in')
            ? c.value.map(toValue)
            : [toValue(c.value)],
      })),
      actions: [{ action_type: `ACTION_TYPE_${rule.decision}`, message: rule.message ?? '' }],
      action: rule.action,
    })),
    scope: {},
    status: `POLICY_STATUS_${policy.status}`,
    enforcement: `ENFORCEMENT_LEVEL_${policy.enforcement}`,
    priority: policy.priority,
    version: policy.version,
    created_at: toTimestamp(policy.created_at),
    updated_at: toTimestamp(policy.updated_at),
  };
}

type Message = Record<string, unknown>;

function ruleInput(rule: Message, at: string) {
  if (enumValue(rule.rule_type, 'RULE_TYPE_') !== undefined)
    throw invalidField(`${at}.rule_type`, 'rule types are not held by this version; leave it unspecified');
  if (rule.enabled === false)
    throw invalidField(`${at}.enabled`, 'disabled rules are not held by this version; remove the rule instead');
  const actions = rule.actions as Message[];
  if (actions.length !== 1) throw invalidField(`${at}.actions`, 'exactly one action is required');
  const [action] = actions as [Message];
  if (enumValue(action.severity, 'SEVERITY_LEVEL_') !== undefined)
    throw invalidField(`${at}.actions.0.severity`, 'severity is not held by this version; leave it unspecified');
  const conditions = (rule.conditions as Message[]).map((condition, i) => {
    const operator = enumValue(condition.operator, 'CONDITION_OPERATOR_');
    const where = `${at}.conditions.${i}`;
    if (operator === undefined || !OPERATOR_BY_GRPC.has(operator)) throw invalidField(`${where}.operator`, 'required');
    const type = enumValue(condition.condition_type, 'CONDITION_TYPE_');
    const canonical = OPERATOR_BY_GRPC.get(operator) as Operator;
    if (type !== undefined && type !== CONDITION_TYPE[canonical])
      throw invalidField(`${where}.condition_type`, `${operator} is a ${CONDITION_TYPE[canonical]} condition`);
    const values = (condition.values as unknown[]).map((value, j) => fromValue(value, `${where}.values.${j}`));
    if (!LIST_OPERATORS.has(operator) && values.length !== 1)
      throw invalidField(`${where}.values`, `${operator} takes exactly one value`);
    return { field: condition.field, operator, value: LIST_OPERATORS.has(operator) ? values : values[0] };
  });
  return {
    ...(present(rule.rule_id) === undefined ? {} : { rule_id: rule.rule_id }),
    ...(present(rule.name) === undefined ? {} : { name: rule.name }),
    action: present(rule.action) ?? '*',
    decision: action.action_type,
    conditions,
    ...(present(action.message) === undefined ? {} : { message: action.message }),
  };
}

/**
 * A gRPC Policy as the canonical create request: rules carry their decision in their one
 * action, status defaults to DRAFT and enforcement to AUDIT (spec 2.6), priority 0 to 100.
 * Refused fields are named as the request names them (`policy.rules.0.actions`).
 */
export function policyCreateInput(policy: Message | null, prefix = 'policy.'): RestCreatePolicyRequest {
  if (policy === null) throw invalidField(prefix.slice(0, -1), 'required');
  const rules = (policy.rules as Message[]).map((rule, i) => ruleInput(rule, `${prefix}rules.${i}`));
  const priority = policy.priority as number;
  return renamedFields(
    {},
    () =>
      parseOrThrow(
        RestCreatePolicyRequestSchema,
        {
          name: policy.name,
          description: policy.description,
          rules: rules.map(({ decision, ...rule }) => ({ ...rule, decision })),
          priority: priority === 0 ? 100 : priority,
          status: enumValue(policy.status, 'POLICY_STATUS_') ?? 'DRAFT',
          enforcement: enumValue(policy.enforcement, 'ENFORCEMENT_LEVEL_') ?? 'AUDIT',
          tags: policy.tags,
        },
        'request',
      ),
    prefix,
  );
}

/** The canonical result as svc.policy.v1.EvaluationResult. */
export function toGrpcEvaluationResult(
  result: EvaluationResult,
  policies: ReadonlyMap<string, Policy>,
  approvalId: string | null,
) {
  const deciding = result.matched_policy === null ? undefined : policies.get(result.matched_policy);
  const rule = deciding?.rules.find((r) => r.rule_id === result.matched_rule);
  return {
    policy_id: result.matched_policy ?? '',
    decision: `EVALUATION_DECISION_${result.decision}`,
    matched_rules:
      result.matched_rule === null
        ? []
        : [
            {
              rule_id: result.matched_rule,
              rule_name: rule?.name ?? '',
              matched_conditions: rule?.conditions.map((c) => c.field) ?? [],
            },
          ],
    actions:
      result.matched_rule === null
        ? []
        : [{ action_type: `ACTION_TYPE_${result.decision}`, message: result.message ?? '' }],
    message: result.message ?? result.reason,
    evaluation_duration_ms: Math.round(result.evaluation_time_ms),
    allowed: result.allowed,
    reason: result.reason,
    enforcement:
      result.enforcement === null ? 'ENFORCEMENT_LEVEL_UNSPECIFIED' : `ENFORCEMENT_LEVEL_${result.enforcement}`,
    warnings: result.warnings,
    shadow: result.shadow.map((s) => ({ ...s, decision: `EVALUATION_DECISION_${s.decision}` })),
    approval_id: approvalId ?? '',
  };
}

const PHASES_ACTION: Record<string, (context: Message) => string[]> = {
  PRE_EXECUTION: () => ['execution:start'],
  PRE_LLM_CALL: (c) => [`llm:${String(c.model_id)}`],
  POST_LLM_CALL: (c) => [`llm:${String(c.model_id)}`],
  PRE_TOOL_CALL: (c) => (c.tool_names as string[]).map((name) => `tool:${name}`),
  POST_TOOL_CALL: (c) => (c.tool_names as string[]).map((name) => `tool:${name}`),
};

/** Names that would reach an object's prototype rather than a field of its own. */
const UNSAFE_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** A string attribute as the engine compares it: numbers and booleans as such. */
function attributeValue(value: string): unknown {
  if (value === 'true' || value === 'false') return value === 'true';
  const number = Number(value);
  return value.trim() !== '' && Number.isFinite(number) ? number : value;
}

/**
 * The canonical question(s) an EvaluationContext asks: its `action`, or the actions its phase
 * implies (one per tool of a tool phase), and the context fields by name with the attributes
 * merged in (a dotted key nests: `request.model`).
 */
export function evaluationQuestions(context: Message | null, at = 'context') {
  if (context === null) throw invalidField(at, 'required');
  const phase = enumValue(context.phase, 'EXECUTION_PHASE_');
  // Each tool of a tool phase is an evaluation of its own, recorded: as many as REST allows in
  // one list, so one message cannot ask for thousands.
  for (const list of ['tool_names', 'user_roles'] as const)
    if ((context[list] as unknown[]).length > MAX_LIST_ITEMS)
      throw invalidField(`${at}.${list}`, `at most ${MAX_LIST_ITEMS} items`);
  if (Object.keys(context.attributes as Record<string, string>).length > MAX_LIST_ITEMS)
    throw invalidField(`${at}.attributes`, `at most ${MAX_LIST_ITEMS} entries`);
  const explicit = present(context.action);
  let actions: string[];
  if (explicit !== undefined) actions = [explicit];
  else if (phase === undefined) throw invalidField(`${at}.phase`, 'required when action is empty');
  else {
    actions = PHASES_ACTION[phase]?.(context) ?? [];
    if (phase.includes('LLM') && present(context.model_id) === undefined)
      throw invalidField(`${at}.model_id`, `required for ${String(context.phase)} when action is empty`);
    if (actions.length === 0)
      throw invalidField(`${at}.tool_names`, `required for ${String(context.phase)} when action is empty`);
  }
  const facts: Record<string, unknown> = {};
  for (const key of ['tenant_id', 'workflow_id', 'envelope_id', 'user_id', 'model_id', 'input_text', 'output_text']) {
    const value = present(context[key]);
    if (value !== undefined) facts[key] = value;
  }
  const tools = context.tool_names as string[];
  if (tools.length > 0) {
    facts.tool_names = tools;
    facts.tool_name = tools[0];
  }
  if ((context.user_roles as string[]).length > 0) facts.user_roles = context.user_roles;
  if (phase !== undefined) facts.phase = phase;
  for (const [key, raw] of Object.entries(context.attributes as Record<string, string>)) {
    const path = key.split('.');
    if (path.some((part) => part === '' || UNSAFE_KEYS.has(part)))
      throw invalidField(`${at}.attributes`, `key ${JSON.stringify(key)} is not a dotted path of names`);
    let target = facts;
    for (const part of path.slice(0, -1)) {
      const next = Object.hasOwn(target, part) ? target[part] : (target[part] = {});
      if (typeof next !== 'object' || next === null || Array.isArray(next))
        throw invalidField(`${at}.attributes`, `key ${JSON.stringify(key)} nests under a field that has a value`);
      target = next as Record<string, unknown>;
    }
    target[path[path.length - 1] as string] = attributeValue(raw);
  }
  const envelopeId = present(context.envelope_id);
  if (envelopeId !== undefined && !z.uuid().safeParse(envelopeId).success)
    throw invalidField(`${at}.envelope_id`, 'must be a UUID');
  return { actions, context: facts, envelopeId };
}
