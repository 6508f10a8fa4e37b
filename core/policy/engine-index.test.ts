import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileRuleset, evaluate, type CompiledRuleset } from './engine.ts';
import { activePolicy } from '../../test/fixtures/policies.ts';
import type { Policy, PolicyRule } from './model.ts';

const ACTIONS = ['tool:shell', 'tool:fs:write', 'llm:gpt-4o', 'execution:start', 'mcp:query'];
const PATTERNS = ['tool:shell', 'tool:*', 'tool:fs:*', 'llm:gpt-4*', '*', '*:write', 'execution:start', 'mcp:*'];

const ruleArb = fc.record({
  action: fc.constantFrom(...PATTERNS),
  decision: fc.constantFrom<PolicyRule['decision'][]>('ALLOW', 'DENY', 'WARN', 'REQUIRE_APPROVAL'),
  risky: fc.boolean(),
});
const policyArb = fc.record({
  priority: fc.integer({ min: 1, max: 5 }),
  enforcement: fc.constantFrom<Policy['enforcement'][]>('BLOCK', 'TERMINATE', 'WARN', 'AUDIT'),
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 4 }),
});

type PolicyShape = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

function build(shapes: PolicyShape[]): Policy[] {
  return shapes.map((shape, p) =>
    activePolicy(
      shape.rules.map((r, i) => ({
        rule_id: `r${i}`,
        name: `r${i}`,
        action: r.action,
        decision: r.decision,
        conditions: r.risky ? [{ field: 'risk', operator: 'gte', value: 5 }] : [],
      })),
      {
        policy_id: `00000000-0000-4000-8000-${String(p).padStart(12, '0')}`,
        name: `policy-${p}`,
        priority: shape.priority,
        enforcement: shape.enforcement,
      },
    ),
  );
}

/** The same ruleset walked rule by rule, as without the index. */
function fullScan(ruleset: CompiledRuleset): CompiledRuleset {
  const all = Int32Array.from(ruleset.steps.keys());
  return { ...ruleset, index: { candidates: () => all } };
}

describe('evaluation through the action index', () => {
  it('decides exactly as a walk over every rule, also with a policy set', () => {
    fc.assert(
      fc.property(
        fc.array(policyArb, { minLength: 1, maxLength: 12 }),
        fc.constantFrom(...ACTIONS),
        fc.integer({ min: 0, max: 9 }),
        fc.subarray(['policy-0', 'policy-2', 'policy-5', 'policy-7']),
        (shapes, action, risk, policySet) => {
          const ruleset = compileRuleset(build(shapes), 1);
          const input = { action, context: { risk }, policySet };
          const indexed = evaluate(ruleset, input);
          const scanned = evaluate(fullScan(ruleset), input);
          expect({ ...indexed, evaluation_time_ms: 0 }).toEqual({ ...scanned, evaluation_time_ms: 0 });
        },
      ),
      { numRuns: 3000 },
    );
  });
});
