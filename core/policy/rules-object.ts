import { z } from 'zod';
import { IdSchema, MAX_LIST_ITEMS } from '../domain/bounds.ts';
import { SvcError } from '../errors/index.ts';
import { DecisionSchema, PolicyConditionSchema, type PolicyRule } from './model.ts';
import { RestPolicyRuleInputSchema } from './rest.ts';

/**
 * The policy shapes of MCP (spec 2.9) and of the guides' `/api/v1/policies` (spec 4.4) carry a
 * `rules` object and a policy type; the canonical model has an ordered rule array and no type.
 */

/** The keys a JavaScript object orders before all others (array indexes): `0`, `2`, `10`. */
const INTEGER_LIKE = /^(?:0|[1-9]\d*)$/;

/** The canonical model has no policy type: the type a surface names is kept as this tag. */
export const POLICY_TYPE_TAG = 'policy_type';

/**
 * `rules` as an object keyed by rule id: each value is a rule as REST writes it (`action`,
 * `effect` or `decision`, `conditions`, `message`), in the key order given.
 */
export const RulesObjectInputSchema = z
  .record(IdSchema, RestPolicyRuleInputSchema)
  .refine((rules) => Object.keys(rules).length <= MAX_LIST_ITEMS, `at most ${MAX_LIST_ITEMS} rules`)
  .superRefine((rules, ctx) => {
    // A JSON object's integer-like keys come first whatever their place in the text, so
    // `{"block-shell": ..., "2": ...}` would be evaluated "2" first: such ids are refused.
    for (const id of Object.keys(rules).filter((key) => INTEGER_LIKE.test(key)))
      ctx.addIssue({
        code: 'custom',
        path: [id],
        message:
          'a rule id in a rules object must not be a whole number: such keys are read before the others, not in key order (name it, e.g. "rule-2")',
      });
  })
  .meta({
    description:
      'Rules keyed by rule id (not a whole number), evaluated in key order: {"no-shell": {"action": "tool:shell", "effect": "deny", "conditions": []}}',
  });

/** The canonical rules of a `rules` object (undefined when none were given). */
export function rulesFromObject(rules: z.output<typeof RulesObjectInputSchema> | undefined): PolicyRule[] | undefined {
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

export const RuleObjectSchema = z.object({
  name: z.string(),
  action: z.string(),
  decision: DecisionSchema,
  conditions: z.array(PolicyConditionSchema),
  message: z.string().optional(),
});
export const RulesObjectSchema = z.record(z.string(), RuleObjectSchema);

/** Canonical rules as a `rules` object, keyed by rule id in evaluation order. */
export function rulesToObject(rules: readonly PolicyRule[]): z.infer<typeof RulesObjectSchema> {
  return Object.fromEntries(
    rules.map((r) => [
      r.rule_id,
      {
        name: r.name,
        action: r.action,
        decision: r.decision,
        conditions: r.conditions,
        ...(r.message === undefined ? {} : { message: r.message }),
      },
    ]),
  );
}

/**
 * A policy fault named as the caller wrote the rules: the canonical rules are an array, so
 * compilePolicy names a faulty rule `rules.<index>`; a `rules` object calls it `rules.<rule id>`.
 * Fields may start with the policy's place in an import (`2.rules.0.action`); `ruleIdsOf` gives
 * the rule ids of that policy (null: the one policy of a create or update).
 */
export function faultsByRuleId(
  error: SvcError,
  ruleIdsOf: (policyIndex: number | null) => readonly string[] | undefined,
): SvcError {
  const renamed = new Map<string, string>();
  const rename = (field: string): string =>
    field.replace(/^(?:(\d+)\.)?rules\.(\d+)(?=\.|$)/, (whole, policy: string | undefined, rule: string) => {
      const id = ruleIdsOf(policy === undefined ? null : Number(policy))?.[Number(rule)];
      return id === undefined ? whole : `${policy === undefined ? '' : `${policy}.`}rules.${id}`;
    });
  const violations = error.fieldViolations.map((v) => {
    const field = rename(v.field);
    if (field !== v.field) renamed.set(v.field, field);
    return { field, description: v.description };
  });
  if (renamed.size === 0) return error;
  let message = error.message;
  for (const [from, to] of renamed) message = message.split(`${from}: `).join(`${to}: `);
  return new SvcError(
    error.code,
    message,
    { ...error.details, fields: violations.map((v) => v.field).join(', ') },
    violations,
  );
}
