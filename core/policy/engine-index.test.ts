import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CheckAnswers, numberChecks } from './check-answers.ts';
import { compileRuleset, evaluate, type CompiledRuleset } from './engine.ts';
import { activePolicy } from '../../test/fixtures/policies.ts';
import type { Policy, PolicyCondition, PolicyRule } from './model.ts';
import type { SyncSemanticJudge } from './semantic-judge.ts';

const ACTIONS = ['tool:shell', 'tool:fs:write', 'llm:gpt-4o', 'execution:start', 'mcp:query'];
const PATTERNS = ['tool:shell', 'tool:*', 'tool:fs:*', 'llm:gpt-4*', '*', '*:write', 'execution:start', 'mcp:*'];

/** A small pool, so rules share conditions as large rulesets do. */
const CONDITIONS: PolicyCondition[] = [
  { field: 'risk', operator: 'gte', value: 5 },
  { field: 'risk', operator: 'lt', value: 3 },
  { field: 'tool_name', operator: 'eq', value: 'shell' },
  { field: 'tool_name', operator: 'in', value: ['shell', 'fs'] },
  { field: 'tool_name', operator: 'not_in', value: ['shell'] },
  { field: 'request.model', operator: 'eq', value: 'gpt-4o' },
  { field: 'input_text', operator: 'contains', value: 'drop' },
  { field: 'input_text', operator: 'matches', value: String.raw`(?i)\bdrop\s+table\b` },
  { field: 'input_text', operator: 'matches', value: '(a+)+$' },
  { field: 'input_text', operator: 'matches', value: String.raw`(?i)api[_-]?key\s*[:=]` },
  { field: 'user_roles', operator: 'in', value: ['admin'] },
  { field: 'absent', operator: 'neq', value: 1 },
];
const TEXTS = [
  '',
  'please DROP  table users',
  'drop it',
  'a'.repeat(300) + '!',
  'a'.repeat(300),
  'API-Key: x',
  'ſelect',
];

const ruleArb = fc.record({
  action: fc.constantFrom(...PATTERNS),
  decision: fc.constantFrom<PolicyRule['decision'][]>('ALLOW', 'DENY', 'WARN', 'REQUIRE_APPROVAL'),
  conditions: fc.subarray(CONDITIONS, { maxLength: 3 }),
});
const policyArb = fc.record({
  priority: fc.integer({ min: 1, max: 5 }),
  enforcement: fc.constantFrom<Policy['enforcement'][]>('BLOCK', 'TERMINATE', 'WARN', 'AUDIT'),
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 4 }),
});

const contextArb = fc.record(
  {
    risk: fc.integer({ min: 0, max: 9 }),
    tool_name: fc.constantFrom('shell', 'fs', 'search'),
    request: fc.record({ model: fc.constantFrom('gpt-4o', 'claude-sonnet-4') }),
    input_text: fc.constantFrom(...TEXTS),
    user_roles: fc.subarray(['admin', 'viewer']),
  },
  { requiredKeys: [] },
);

type PolicyShape = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

function build(shapes: PolicyShape[]): Policy[] {
  return shapes.map((shape, p) =>
    activePolicy(
      shape.rules.map((r, i) => ({
        rule_id: `r${i}`,
        name: `r${i}`,
        action: r.action,
        decision: r.decision,
        conditions: r.conditions,
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

/**
 * The same ruleset walked rule by rule, as without the index, testing every rule's pattern,
 * and answering each rule's checks afresh (no numbering shared between rules).
 */
function fullScan(ruleset: CompiledRuleset): CompiledRuleset {
  const all = Int32Array.from(ruleset.steps.keys());
  const matching = (action: string) => all.filter((i) => ruleset.steps[i]?.rule.matchesAction(action));
  const checks = numberChecks(
    ruleset.steps.map((s) => ({ checks: s.rule.checks.map((c) => ({ ...c, key: undefined })) })),
  );
  return {
    ...ruleset,
    steps: ruleset.steps.map((step, i) => ({ ...step, checkIds: checks.ids[i] as Int32Array })),
    index: { candidates: () => all, ofType: () => all, matching },
    checks,
    answers: new CheckAnswers(checks),
  };
}

describe('evaluation through the action index', () => {
  it('decides exactly as a walk over every rule, also with a policy set', () => {
    fc.assert(
      fc.property(
        fc.array(policyArb, { minLength: 1, maxLength: 12 }),
        fc.constantFrom(...ACTIONS),
        fc.array(contextArb, { minLength: 1, maxLength: 3 }),
        fc.subarray(['policy-0', 'policy-2', 'policy-5', 'policy-7']),
        (shapes, action, contexts, policySet) => {
          const ruleset = compileRuleset(build(shapes), 1);
          const scan = fullScan(ruleset);
          // Several contexts in a row on one ruleset: no answer may carry over to the next.
          for (const context of contexts) {
            const input = { action, context, policySet };
            const indexed = evaluate(ruleset, input);
            const scanned = evaluate(scan, input);
            expect({ ...indexed, evaluation_time_ms: 0 }).toEqual({ ...scanned, evaluation_time_ms: 0 });
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('keeps the answers of an evaluation apart from one its judge starts on the same ruleset', () => {
    const ruleset = compileRuleset(
      [
        activePolicy(
          [
            {
              rule_id: 'judged',
              name: 'judged',
              action: 'tool:*',
              decision: 'DENY',
              conditions: [
                { field: 'tool_name', operator: 'eq', value: 'shell' },
                { field: 'tool_args', operator: 'semantic', value: 'DESTRUCTIVE' },
              ],
            },
          ],
          { priority: 10 },
        ),
        activePolicy(
          [
            {
              rule_id: 'fs',
              name: 'fs',
              action: 'tool:*',
              decision: 'WARN',
              conditions: [{ field: 'tool_name', operator: 'eq', value: 'fs' }],
            },
          ],
          { policy_id: '00000000-0000-4000-8000-000000000002', name: 'fs', priority: 5 },
        ),
      ],
      1,
    );
    const inner: unknown[] = [];
    const judge: SyncSemanticJudge = {
      name: 'reentrant',
      version: '1',
      judge: () => Promise.reject(new Error('not used')),
      judgeNow: () => {
        inner.push(evaluate(ruleset, { action: 'tool:fs', context: { tool_name: 'fs' } }).decision);
        return { violated: false, confidence: 0, evidence: [], truncated: false };
      },
    };
    const outer = evaluate(ruleset, { action: 'tool:shell', context: { tool_name: 'shell', tool_args: 'ls' } }, judge);
    expect(inner).toEqual(['WARN']);
    expect(outer).toMatchObject({ decision: 'ALLOW', effect: 'no_match', warnings: [] });
    // And the shared answers are free again afterwards.
    expect(evaluate(ruleset, { action: 'tool:fs', context: { tool_name: 'fs' } }).decision).toBe('WARN');
  });
});
