import { SvcError, type FieldViolation } from '../errors/index.ts';
import { foldCase } from './case-fold.ts';
import { compileActionPattern, type ActionMatcher } from './action-pattern.ts';
import { compileCondition, type CompiledCheck, type CompiledSemantic } from './condition.ts';
import type { Decision, Enforcement, Policy, PolicyRule } from './model.ts';

export interface CompiledRule {
  readonly ruleId: string;
  readonly name: string;
  readonly decision: Decision;
  readonly message: string | undefined;
  /** The action pattern case-folded (actions match without regard to case), for the ruleset's action index. */
  readonly action: string;
  readonly matchesAction: ActionMatcher;
  readonly checks: readonly CompiledCheck[];
  readonly semantic: readonly CompiledSemantic[];
  /** The category of the rule's `sequence` condition, when it has one: its match is a detection. */
  readonly sequence: string | undefined;
}

export interface CompiledPolicy {
  readonly policyId: string;
  readonly name: string;
  readonly priority: number;
  readonly enforcement: Enforcement;
  readonly rules: readonly CompiledRule[];
}

/**
 * Compiles one policy's rules, or throws SVC-POL-2003 naming every faulty part
 * (`rules.0.action`, `rules.1.conditions.2.value`). Used both to refuse a bad policy
 * when it is written and to build rulesets.
 */
export function compilePolicy(
  policy: Pick<Policy, 'policy_id' | 'name' | 'priority' | 'enforcement' | 'rules'>,
): CompiledPolicy {
  const violations: FieldViolation[] = [];
  const seenRuleIds = new Set<string>();
  const rules = policy.rules.map((rule, r) => {
    if (seenRuleIds.has(rule.rule_id))
      violations.push({ field: `rules.${r}.rule_id`, description: `duplicate rule_id "${rule.rule_id}"` });
    seenRuleIds.add(rule.rule_id);
    return compileRule(rule, `rules.${r}`, violations);
  });
  if (violations.length > 0) {
    throw new SvcError(
      'SVC-POL-2003',
      `invalid policy "${policy.name}": ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
      { policy_id: policy.policy_id, fields: violations.map((v) => v.field).join(', ') },
      violations,
    );
  }
  return {
    policyId: policy.policy_id,
    name: policy.name,
    priority: policy.priority,
    enforcement: policy.enforcement,
    rules,
  };
}

function compileRule(rule: PolicyRule, path: string, violations: FieldViolation[]): CompiledRule {
  let matchesAction: ActionMatcher = () => false;
  if (rule.action.trim() === '') {
    violations.push({ field: `${path}.action`, description: 'action pattern is empty' });
  } else {
    matchesAction = compileActionPattern(foldCase(rule.action));
  }
  const checks: CompiledCheck[] = [];
  const semantic: CompiledSemantic[] = [];
  rule.conditions.forEach((condition, c) => {
    const compiled = compileCondition(condition, rule.decision === 'ALLOW' ? 'every' : 'some');
    if (!compiled.ok) {
      violations.push({
        field: `${path}.conditions.${c}.${compiled.fault.part}`,
        description: compiled.fault.description,
      });
    } else if (compiled.condition.kind === 'semantic') {
      semantic.push(compiled.condition);
    } else {
      checks.push(compiled.condition);
    }
  });
  checks.sort((a, b) => a.cost - b.cost);
  return {
    ruleId: rule.rule_id,
    name: rule.name,
    decision: rule.decision,
    message: rule.message,
    action: foldCase(rule.action),
    matchesAction,
    checks,
    semantic,
    sequence: checks.find((c) => c.sequence !== undefined)?.sequence?.category,
  };
}
