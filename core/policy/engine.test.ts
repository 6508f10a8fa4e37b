import { RE2JS } from 're2js';
import { describe, expect, it, vi } from 'vitest';
import { SvcError } from '../errors/index.ts';
import { compileRuleset, evaluate, evaluateAsync } from './engine.ts';
import { judgesToolNames } from './tool-name-rules.ts';
import { UNKNOWN_VALUE } from './unknown-value.ts';
import { createBuiltinJudge } from '../brain/index.ts';
import type { Policy, PolicyRule } from './model.ts';
import type { JudgeInput, SemanticJudge } from './semantic-judge.ts';

let counter = 0;
function policy(overrides: Partial<Policy> & { rules: PolicyRule[] }): Policy {
  counter++;
  return {
    policy_id: `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`,
    tenant_id: 'tenant-a',
    name: `policy-${counter}`,
    description: '',
    priority: 100,
    status: 'ACTIVE',
    enforcement: 'BLOCK',
    tags: {},
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

function rule(
  ruleId: string,
  action: string,
  decision: PolicyRule['decision'],
  conditions: PolicyRule['conditions'] = [],
  message?: string,
): PolicyRule {
  return { rule_id: ruleId, name: ruleId, action, decision, conditions, ...(message === undefined ? {} : { message }) };
}

describe('compileRuleset', () => {
  it('keeps only ACTIVE policies, highest priority first, stable on created_at then policy_id', () => {
    const low = policy({ name: 'low', priority: 10, rules: [rule('r', '*', 'ALLOW')] });
    const high = policy({ name: 'high', priority: 900, rules: [rule('r', '*', 'ALLOW')] });
    const tieLater = policy({
      name: 'tie-later',
      priority: 500,
      created_at: '2026-02-01T00:00:00.000Z',
      rules: [rule('r', '*', 'ALLOW')],
    });
    const tieEarlierB = policy({
      name: 'tie-earlier-b',
      priority: 500,
      policy_id: '00000000-0000-4000-8000-bbbbbbbbbbbb',
      rules: [rule('r', '*', 'ALLOW')],
    });
    const tieEarlierA = policy({
      name: 'tie-earlier-a',
      priority: 500,
      policy_id: '00000000-0000-4000-8000-aaaaaaaaaaaa',
      rules: [rule('r', '*', 'ALLOW')],
    });
    const draft = policy({ name: 'draft', priority: 1000, status: 'DRAFT', rules: [rule('r', '*', 'DENY')] });
    const disabled = policy({ name: 'disabled', priority: 1000, status: 'DISABLED', rules: [rule('r', '*', 'DENY')] });
    const ruleset = compileRuleset([low, draft, tieLater, high, tieEarlierB, disabled, tieEarlierA], 7);
    expect(ruleset.version).toBe(7);
    expect(ruleset.policies.map((p) => p.name)).toEqual(['high', 'tie-earlier-a', 'tie-earlier-b', 'tie-later', 'low']);
    expect(ruleset.needsJudge).toBe(false);
  });

  it('refuses a policy that cannot compile with SVC-POL-2003 naming the field', () => {
    const bad = policy({
      rules: [
        rule('r1', 'tool:*', 'DENY'),
        rule('r2', 'tool:*', 'DENY', [
          { field: 'a', operator: 'eq', value: 1 },
          { field: 'b', operator: 'matches', value: '(' },
        ]),
      ],
    });
    try {
      compileRuleset([bad], 1);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(SvcError);
      const svc = error as SvcError;
      expect(svc.code).toBe('SVC-POL-2003');
      expect(svc.fieldViolations.map((v) => v.field)).toEqual(['rules.1.conditions.1.value']);
      expect(svc.details['policy_id']).toBe(bad.policy_id);
    }
  });

  it('refuses empty action patterns and duplicate rule ids', () => {
    const bad = policy({ rules: [rule('r1', ' ', 'DENY'), rule('r1', 'tool:*', 'DENY')] });
    expect(() => compileRuleset([bad], 1)).toThrow(
      expect.objectContaining({
        code: 'SVC-POL-2003',
        fieldViolations: [
          expect.objectContaining({ field: 'rules.0.action' }),
          expect.objectContaining({ field: 'rules.1.rule_id' }),
        ],
      }),
    );
  });
});

describe('evaluate', () => {
  it("reads a list by each rule's effect, even where an allow and a deny hold the same condition", () => {
    const onlyDocs = { field: 'tool_hosts', operator: 'in' as const, value: ['docs.example'] };
    const ruleset = compileRuleset(
      [
        policy({ name: 'docs-allowed', priority: 200, rules: [rule('a', 'tool:fetch', 'ALLOW', [onlyDocs])] }),
        policy({ name: 'docs-watched', priority: 100, rules: [rule('d', 'tool:fetch', 'DENY', [onlyDocs])] }),
      ],
      1,
    );
    const decide = (hosts: unknown) => evaluate(ruleset, { action: 'tool:fetch', context: { tool_hosts: hosts } });
    // Every host allowed: the allow decides.
    expect(decide(['docs.example'])).toMatchObject({
      decision: 'ALLOW',
      matched_policy: ruleset.policies[0]?.policyId,
    });
    // One host not allowed: the allow does not hold, and the deny, reading some host, does.
    expect(decide(['evil.example', 'docs.example'])).toMatchObject({ decision: 'DENY', matched_rule: 'd' });
    // A scalar is read alike by both: the allow decides.
    expect(decide('docs.example').decision).toBe('ALLOW');
  });

  it("reads a value of the wrong shape by each rule's effect, even where an allow and a deny hold the same condition", () => {
    const safe = { field: 'arguments.mode', operator: 'eq' as const, value: 'safe' };
    const small = { field: 'arguments.amount', operator: 'lt' as const, value: 100 };
    const ruleset = compileRuleset(
      [
        policy({ name: 'allowed', priority: 200, rules: [rule('a', 'tool:pay', 'ALLOW', [safe, small])] }),
        policy({
          name: 'watched',
          priority: 100,
          rules: [rule('e', 'tool:pay', 'DENY', [small]), rule('d', 'tool:pay', 'DENY', [safe])],
        }),
      ],
      1,
    );
    const decide = (args: unknown) => evaluate(ruleset, { action: 'tool:pay', context: { arguments: args } });
    expect(decide({ mode: 'safe', amount: 5 }).decision).toBe('ALLOW');
    expect(decide({ mode: { safe: true }, amount: 500 })).toMatchObject({ decision: 'DENY', matched_rule: 'd' });
    expect(decide({ mode: 'safe', amount: '5 USD' })).toMatchObject({ decision: 'DENY', matched_rule: 'e' });
  });

  it("reads a pattern's . by each rule's effect, even where an allow and a deny hold the same condition", () => {
    const oneCommand = { field: 'input_text', operator: 'matches' as const, value: '^git .*$' };
    const ruleset = compileRuleset(
      [
        policy({ name: 'git-allowed', priority: 200, rules: [rule('a', 'tool:shell', 'ALLOW', [oneCommand])] }),
        policy({ name: 'git-watched', priority: 100, rules: [rule('d', 'tool:shell', 'DENY', [oneCommand])] }),
      ],
      1,
    );
    const decide = (text: string) => evaluate(ruleset, { action: 'tool:shell', context: { input_text: text } });
    expect(decide('git status')).toMatchObject({ decision: 'ALLOW', matched_rule: 'a' });
    // The allow's . stops at the line break; the deny's crosses it, though it is asked the same.
    expect(decide('git status\nrm -rf /')).toMatchObject({ decision: 'DENY', matched_rule: 'd' });
  });

  it('answers every condition on a value not known yet fail-closed: a deny holds, an allow does not', () => {
    const conditions: PolicyRule['conditions'] = [
      { field: 'workflow_id', operator: 'eq', value: 'billing' },
      { field: 'workflow_id', operator: 'neq', value: 'billing' },
      { field: 'workflow_id', operator: 'in', value: ['billing'] },
      { field: 'workflow_id', operator: 'not_in', value: ['billing'] },
      { field: 'workflow_id', operator: 'matches', value: '^bill' },
      { field: 'workflow_id', operator: 'contains', value: 'bill' },
      { field: 'workflow_id', operator: 'gt', value: 3 },
    ];
    for (const condition of conditions) {
      const ruleset = compileRuleset(
        [
          policy({ name: 'allowed', priority: 200, rules: [rule('a', 'llm:*', 'ALLOW', [condition])] }),
          policy({ name: 'watched', priority: 100, rules: [rule('d', 'llm:*', 'DENY', [condition])] }),
        ],
        1,
      );
      const unknown = evaluate(ruleset, { action: 'llm:gpt-4o', context: { workflow_id: UNKNOWN_VALUE } });
      expect(unknown, condition.operator).toMatchObject({ decision: 'DENY', matched_rule: 'd' });
      // Absent, the same condition matches neither rule.
      expect(evaluate(ruleset, { action: 'llm:gpt-4o', context: {} }).effect, condition.operator).toBe('no_match');
    }
  });

  it('leaves a value not known yet out of the context as JSON', () => {
    expect(JSON.stringify({ tenant_id: 't', workflow_id: UNKNOWN_VALUE })).toBe('{"tenant_id":"t"}');
  });

  it('gives ALLOW with effect no_match when nothing matches', () => {
    const ruleset = compileRuleset([policy({ rules: [rule('r', 'tool:shell', 'DENY')] })], 1);
    const result = evaluate(ruleset, { action: 'tool:search', context: {} });
    expect(result).toMatchObject({
      decision: 'ALLOW',
      allowed: true,
      effect: 'no_match',
      matched_policy: null,
      matched_rule: null,
      matched_action: null,
      enforcement: null,
      warnings: [],
      shadow: [],
    });
    expect(result.reason).toBe('no policy rule matched');
    expect(result.evaluation_time_ms).toBeGreaterThanOrEqual(0);
  });

  it('matches actions without regard to case, exact names and globs alike', () => {
    const ruleset = compileRuleset(
      [policy({ rules: [rule('r', 'tool:DeleteRepo', 'DENY'), rule('g', 'llm:GPT-4o*', 'DENY')] })],
      1,
    );
    for (const action of ['tool:deleterepo', 'tool:DELETEREPO', 'TOOL:DeleteRepo', 'llm:gpt-4o-mini'])
      expect(evaluate(ruleset, { action, context: {} }).decision, action).toBe('DENY');
    expect(evaluate(ruleset, { action: 'tool:delete_repo', context: {} }).decision).toBe('ALLOW');
  });

  it('compares tool and model names in conditions without regard to case', () => {
    const ruleset = compileRuleset(
      [
        policy({
          rules: [
            rule('t', 'tool:*', 'DENY', [{ field: 'tool_name', operator: 'in', value: ['DeleteRepo'] }]),
            rule('m', 'llm:*', 'DENY', [{ field: 'model', operator: 'eq', value: 'gpt-4o' }]),
          ],
        }),
      ],
      1,
    );
    for (const name of ['DeleteRepo', 'deleterepo', 'DELETEREPO'])
      expect(evaluate(ruleset, { action: `tool:${name}`, context: { tool_name: name } }).decision, name).toBe('DENY');
    expect(evaluate(ruleset, { action: 'llm:GPT-4o', context: { model: 'GPT-4o' } }).decision).toBe('DENY');
    expect(evaluate(ruleset, { action: 'llm:gpt-4o-mini', context: { model: 'gpt-4o-mini' } }).decision).toBe('ALLOW');
  });

  it('holds a deny on a model under the family name of the snapshot or path sent, and an allow only on the name sent', () => {
    const ruleset = compileRuleset(
      [
        policy({
          name: 'pinned',
          priority: 300,
          rules: [rule('pin', 'llm:*', 'ALLOW', [{ field: 'model', operator: 'eq', value: 'gpt-4o-mini-2024-07-18' }])],
        }),
        policy({
          name: 'no-gpt-4o',
          priority: 200,
          rules: [
            rule('m', 'llm:*', 'DENY', [{ field: 'model', operator: 'eq', value: 'gpt-4o' }]),
            rule('a', 'llm:claude-3-5-haiku', 'REQUIRE_APPROVAL'),
          ],
        }),
        policy({ name: 'others', priority: 100, rules: [rule('any', 'llm:*', 'ALLOW')] }),
        policy({ name: 'mini-only', priority: 50, rules: [rule('x', 'llm:gpt-4o-mini', 'DENY')] }),
      ],
      1,
    );
    const decide = (model: string) => evaluate(ruleset, { action: `llm:${model}`, context: { model } });
    for (const model of ['gpt-4o', 'GPT-4o', 'gpt-4o-2024-08-06', 'openai/gpt-4o', 'OpenAI/GPT-4o-2024-11-20'])
      expect(decide(model), model).toMatchObject({ decision: 'DENY', matched_rule: 'm' });
    expect(decide('claude-3-5-haiku-20241022')).toMatchObject({ decision: 'REQUIRE_APPROVAL', matched_rule: 'a' });
    // The allow names one snapshot: it allows that one, not the family's others.
    expect(decide('gpt-4o-mini-2024-07-18')).toMatchObject({ decision: 'ALLOW', matched_rule: 'pin' });
    expect(decide('gpt-4o-mini')).toMatchObject({ decision: 'ALLOW', matched_rule: 'any' });
    expect(decide('gpt-4o-audio-preview')).toMatchObject({ decision: 'ALLOW', matched_rule: 'any' });
  });

  it("reads a tool's arguments as a deny must, whatever shape the agent gives them", () => {
    const ruleset = compileRuleset(
      [
        policy({
          rules: [
            rule('big', 'tool:refund', 'DENY', [{ field: 'arguments.amount', operator: 'gt', value: 1000 }]),
            rule('rm', 'tool:shell', 'DENY', [{ field: 'arguments.cmd', operator: 'contains', value: 'rm -rf' }]),
            rule('rx', 'tool:shell', 'DENY', [{ field: 'arguments', operator: 'matches', value: 'rm -rf' }]),
            rule('small', 'tool:refund', 'ALLOW', [{ field: 'arguments.amount', operator: 'lte', value: 1000 }]),
            rule('rest', 'tool:*', 'REQUIRE_APPROVAL'),
          ],
        }),
      ],
      1,
    );
    const decide = (action: string, args: unknown) => evaluate(ruleset, { action, context: { arguments: args } });
    for (const amount of [5000, '5000', '5_000', '５０００', '5000.00 USD', '5e3'])
      expect(decide('tool:refund', { amount }).matched_rule, String(amount)).toBe('big');
    expect(decide('tool:refund', { Amount: 5000 }).matched_rule).toBe('big');
    expect(decide('tool:refund', { amount: 5, Amount: 5000 }).matched_rule).toBe('big');
    expect(decide('tool:refund', { amount: 50 }).matched_rule).toBe('small');
    expect(decide('tool:shell', { cmd: ['bash', '-c', 'rm -rf /'] }).matched_rule).toBe('rm');
    expect(decide('tool:shell', { command: 'rm -rf /' }).matched_rule).toBe('rx');
    expect(decide('tool:shell', { cmd: ['ls', '-l'] }).matched_rule).toBe('rest');
  });

  it('denies on a matching DENY with the policy, rule and message', () => {
    const p = policy({
      name: 'no-shell',
      rules: [
        rule(
          'block-shell',
          'tool:*',
          'DENY',
          [{ field: 'tool_name', operator: 'eq', value: 'shell' }],
          'shell is not allowed',
        ),
      ],
    });
    const result = evaluate(compileRuleset([p], 1), { action: 'tool:invoke', context: { tool_name: 'shell' } });
    expect(result).toMatchObject({
      decision: 'DENY',
      allowed: false,
      effect: 'deny',
      matched_policy: p.policy_id,
      matched_policy_name: 'no-shell',
      matched_rule: 'block-shell',
      matched_action: 'tool:*',
      enforcement: 'BLOCK',
      message: 'shell is not allowed',
    });
    expect(result.reason).toBe('denied by policy "no-shell" rule "block-shell": shell is not allowed');
  });

  it('requires all conditions of a rule to match', () => {
    const p = policy({
      rules: [
        rule('r', 'llm:*', 'DENY', [
          { field: 'request.model', operator: 'matches', value: '^gpt-4' },
          { field: 'budget.percent_used', operator: 'gte', value: 90 },
        ]),
      ],
    });
    const ruleset = compileRuleset([p], 1);
    expect(
      evaluate(ruleset, { action: 'llm:chat', context: { request: { model: 'gpt-4o' }, budget: { percent_used: 95 } } })
        .decision,
    ).toBe('DENY');
    expect(
      evaluate(ruleset, { action: 'llm:chat', context: { request: { model: 'gpt-4o' }, budget: { percent_used: 50 } } })
        .decision,
    ).toBe('ALLOW');
    expect(
      evaluate(ruleset, { action: 'llm:chat', context: { request: { model: 'claude' }, budget: { percent_used: 95 } } })
        .decision,
    ).toBe('ALLOW');
  });

  it('does not match a condition on a missing field, whatever the operator', () => {
    const p = policy({
      rules: [
        rule('neq', '*', 'DENY', [{ field: 'env', operator: 'neq', value: 'prod' }]),
        rule('not-in', '*', 'DENY', [{ field: 'role', operator: 'not_in', value: ['admin'] }]),
        rule('lt', '*', 'DENY', [{ field: 'score', operator: 'lt', value: 5 }]),
      ],
    });
    const result = evaluate(compileRuleset([p], 1), { action: 'x', context: { other: 1 } });
    expect(result.effect).toBe('no_match');
  });

  it('walks rules in order within a policy and stops at the first decision', () => {
    const p = policy({
      rules: [
        rule('first', 'tool:*', 'ALLOW', [{ field: 'tool_name', operator: 'eq', value: 'search' }]),
        rule('second', 'tool:*', 'DENY'),
      ],
    });
    const ruleset = compileRuleset([p], 1);
    expect(evaluate(ruleset, { action: 'tool:call', context: { tool_name: 'search' } }).matched_rule).toBe('first');
    expect(evaluate(ruleset, { action: 'tool:call', context: { tool_name: 'shell' } }).matched_rule).toBe('second');
  });

  it('lets an ALLOW at higher priority override a lower-priority DENY', () => {
    const deny = policy({ name: 'deny-tools', priority: 100, rules: [rule('deny', 'tool:*', 'DENY')] });
    const allow = policy({ name: 'allow-search', priority: 500, rules: [rule('allow', 'tool:search', 'ALLOW')] });
    const ruleset = compileRuleset([deny, allow], 1);
    expect(evaluate(ruleset, { action: 'tool:search', context: {} })).toMatchObject({
      decision: 'ALLOW',
      effect: 'allow',
      matched_policy_name: 'allow-search',
    });
    expect(evaluate(ruleset, { action: 'tool:shell', context: {} })).toMatchObject({
      decision: 'DENY',
      matched_policy_name: 'deny-tools',
    });
  });

  it('lets a higher-priority DENY win over a lower-priority ALLOW', () => {
    const allow = policy({ priority: 100, rules: [rule('allow', '*', 'ALLOW')] });
    const deny = policy({ priority: 200, rules: [rule('deny', 'tool:*', 'DENY')] });
    expect(evaluate(compileRuleset([allow, deny], 1), { action: 'tool:x', context: {} }).decision).toBe('DENY');
  });

  it('records WARN rules and continues to the deciding rule', () => {
    const warn = policy({
      name: 'cost-watch',
      priority: 900,
      rules: [
        rule('expensive', 'llm:*', 'WARN', [{ field: 'estimated_cost', operator: 'gt', value: 1 }], 'expensive call'),
      ],
    });
    const deny = policy({ name: 'no-gpt4', priority: 100, rules: [rule('gpt4', 'llm:gpt-4*', 'DENY')] });
    const ruleset = compileRuleset([warn, deny], 1);
    const denied = evaluate(ruleset, { action: 'llm:gpt-4o', context: { estimated_cost: 2 } });
    expect(denied).toMatchObject({
      decision: 'DENY',
      matched_rule: 'gpt4',
      warnings: [{ policy_id: warn.policy_id, rule_id: 'expensive', message: 'expensive call' }],
    });
    const warned = evaluate(ruleset, { action: 'llm:claude', context: { estimated_cost: 2 } });
    expect(warned).toMatchObject({
      decision: 'WARN',
      allowed: true,
      effect: 'allow',
      matched_policy: warn.policy_id,
      matched_rule: 'expensive',
      matched_action: 'llm:*',
      enforcement: null,
    });
    expect(warned.warnings).toHaveLength(1);
    expect(warned.reason).toBe(
      'allowed with 1 warning(s), first: warned by policy "cost-watch" rule "expensive": expensive call',
    );
  });

  it('names the policy and rule in a warning without a message', () => {
    const p = policy({ name: 'quiet', rules: [rule('no-message', '*', 'WARN')] });
    const result = evaluate(compileRuleset([p], 1), { action: 'x', context: {} });
    expect(result.warnings).toEqual([
      { policy_id: p.policy_id, rule_id: 'no-message', message: 'warned by policy "quiet" rule "no-message"' },
    ]);
  });

  it('stops at REQUIRE_APPROVAL, not allowed, effect deny', () => {
    const p = policy({
      name: 'hitl',
      rules: [
        rule('approve-payments', 'tool:payment*', 'REQUIRE_APPROVAL', [
          { field: 'amount', operator: 'gt', value: 100 },
        ]),
      ],
    });
    const lowerAllow = policy({ priority: 1, rules: [rule('allow', '*', 'ALLOW')] });
    const result = evaluate(compileRuleset([p, lowerAllow], 1), {
      action: 'tool:payment.send',
      context: { amount: 250 },
    });
    expect(result).toMatchObject({
      decision: 'REQUIRE_APPROVAL',
      allowed: false,
      effect: 'deny',
      matched_rule: 'approve-payments',
    });
    expect(result.reason).toMatch(/^approval required by policy "hitl"/);
  });

  it('runs AUDIT policies in shadow mode: recorded, never deciding', () => {
    const audit = policy({
      name: 'shadow',
      priority: 900,
      enforcement: 'AUDIT',
      rules: [rule('would-deny', 'tool:*', 'DENY'), rule('never-reached', 'tool:*', 'DENY')],
    });
    const auditWarn = policy({
      priority: 800,
      enforcement: 'AUDIT',
      rules: [rule('would-warn', 'tool:*', 'WARN'), rule('would-allow', 'tool:*', 'ALLOW')],
    });
    const ruleset = compileRuleset([audit, auditWarn], 1);
    const result = evaluate(ruleset, { action: 'tool:shell', context: {} });
    expect(result).toMatchObject({ decision: 'ALLOW', allowed: true, effect: 'no_match', warnings: [] });
    expect(result.shadow).toEqual([
      { policy_id: audit.policy_id, rule_id: 'would-deny', decision: 'DENY' },
      { policy_id: auditWarn.policy_id, rule_id: 'would-warn', decision: 'WARN' },
      { policy_id: auditWarn.policy_id, rule_id: 'would-allow', decision: 'ALLOW' },
    ]);
  });

  it('downgrades DENY and REQUIRE_APPROVAL of a WARN-enforcement policy to warnings', () => {
    const soft = policy({
      name: 'soft',
      priority: 900,
      enforcement: 'WARN',
      rules: [rule('soft-deny', 'tool:*', 'DENY', [], 'risky tool'), rule('skipped', 'tool:*', 'DENY')],
    });
    const softApproval = policy({
      name: 'soft-approval',
      priority: 800,
      enforcement: 'WARN',
      rules: [rule('soft-approve', 'tool:*', 'REQUIRE_APPROVAL')],
    });
    const hard = policy({ name: 'hard', priority: 100, rules: [rule('hard-deny', 'tool:shell', 'DENY')] });
    const ruleset = compileRuleset([soft, softApproval, hard], 1);
    const allowed = evaluate(ruleset, { action: 'tool:search', context: {} });
    expect(allowed).toMatchObject({ decision: 'WARN', allowed: true });
    expect(allowed.warnings.map((w) => w.rule_id)).toEqual(['soft-deny', 'soft-approve']);
    expect(allowed.warnings[0]?.message).toBe('would deny (policy "soft" rule "soft-deny"): risky tool');
    expect(allowed.warnings[1]?.message).toMatch(/^would require approval/);
    const denied = evaluate(ruleset, { action: 'tool:shell', context: {} });
    expect(denied).toMatchObject({ decision: 'DENY', matched_rule: 'hard-deny' });
    expect(denied.warnings).toHaveLength(2);
  });

  it('reports TERMINATE enforcement so the caller can end the envelope', () => {
    const p = policy({
      enforcement: 'TERMINATE',
      rules: [rule('kill', 'tool:*', 'DENY', [{ field: 'tool_name', operator: 'in', value: ['rm', 'dd'] }])],
    });
    const result = evaluate(compileRuleset([p], 1), { action: 'tool:exec', context: { tool_name: 'rm' } });
    expect(result).toMatchObject({ decision: 'DENY', allowed: false, enforcement: 'TERMINATE' });
  });

  it('restricts evaluation to the policy set, by id or by name', () => {
    const a = policy({ name: 'a', priority: 300, rules: [rule('a', '*', 'DENY')] });
    const b = policy({
      name: 'b',
      priority: 200,
      rules: [rule('b1', 'tool:*', 'WARN'), rule('b2', '*', 'REQUIRE_APPROVAL')],
    });
    const c = policy({ name: 'c', priority: 100, rules: [rule('c', '*', 'ALLOW')] });
    const ruleset = compileRuleset([a, b, c], 1);
    expect(evaluate(ruleset, { action: 'tool:x', context: {}, policySet: [] }).matched_rule).toBe('a');
    expect(evaluate(ruleset, { action: 'tool:x', context: {}, policySet: [c.policy_id] }).matched_rule).toBe('c');
    const onlyB = evaluate(ruleset, { action: 'tool:x', context: {}, policySet: ['b'] });
    expect(onlyB).toMatchObject({ decision: 'REQUIRE_APPROVAL', matched_rule: 'b2' });
    expect(onlyB.warnings.map((w) => w.rule_id)).toEqual(['b1']);
    expect(evaluate(ruleset, { action: 'tool:x', context: {}, policySet: ['c', b.policy_id] }).matched_rule).toBe('b2');
    expect(evaluate(ruleset, { action: 'tool:x', context: {}, policySet: ['unknown'] }).effect).toBe('no_match');
  });

  it('compiles regexes once per ruleset, never per evaluation', () => {
    const compile = vi.spyOn(RE2JS, 'compile');
    try {
      const ruleset = compileRuleset(
        [policy({ rules: [rule('r', '*', 'DENY', [{ field: 't', operator: 'matches', value: '^secret' }])] })],
        1,
      );
      expect(compile).toHaveBeenCalledTimes(1);
      for (let i = 0; i < 100; i++)
        evaluate(ruleset, { action: 'a', context: { t: i % 2 === 0 ? 'secret' : 'public' } });
      expect(compile).toHaveBeenCalledTimes(1);
    } finally {
      compile.mockRestore();
    }
  });

  it('evaluates a catastrophically backtracking pattern against a long adversarial string fast', () => {
    const p = policy({
      rules: [
        rule('redos', '*', 'DENY', [
          { field: 'input_text', operator: 'matches', value: '(a+)+$' },
          { field: 'input_text', operator: 'matches', value: '^(a|aa)+b' },
        ]),
      ],
    });
    const ruleset = compileRuleset([p], 1);
    const adversarial = 'a'.repeat(50_000) + '!';
    const started = performance.now();
    const result = evaluate(ruleset, { action: 'llm:chat', context: { input_text: adversarial } });
    const elapsed = performance.now() - started;
    expect(result.effect).toBe('no_match');
    expect(elapsed).toBeLessThan(1000);
  });
});

/** A judge that gives `verdict` to every question, and the questions it was asked. */
function recordingJudge(verdict: Awaited<ReturnType<SemanticJudge['judge']>>): {
  asked: JudgeInput[];
  judge: SemanticJudge;
} {
  const asked: JudgeInput[] = [];
  const judge: SemanticJudge = {
    name: 'stub',
    version: '1',
    judge: (input) => {
      asked.push(input);
      return Promise.resolve(verdict);
    },
  };
  return { asked, judge };
}

describe('semantic conditions', () => {
  const destructive = (decision: PolicyRule['decision']) =>
    policy({
      name: `semantic-${decision}`,
      rules: [
        rule('intent', 'tool:*', decision, [{ field: 'input_text', operator: 'semantic', value: 'DESTRUCTIVE' }]),
      ],
    });

  it('marks rulesets that need the judge', () => {
    expect(compileRuleset([destructive('DENY')], 1).needsJudge).toBe(true);
  });

  it('denies a destructive command with the built-in judge and allows a benign one', async () => {
    const ruleset = compileRuleset([destructive('DENY')], 1);
    const judge = createBuiltinJudge({ maxTextChars: 65536, allowedHosts: [] });
    const denied = await evaluateAsync(
      ruleset,
      { action: 'tool:shell', context: { input_text: 'sudo rm -rf /var/lib/postgres' } },
      judge,
    );
    expect(denied).toMatchObject({ decision: 'DENY', matched_rule: 'intent' });
    expect(denied.reason).not.toMatch(/fail-closed/);
    const allowed = await evaluateAsync(
      ruleset,
      { action: 'tool:shell', context: { input_text: 'ls -la /tmp' } },
      judge,
    );
    expect(allowed.effect).toBe('no_match');
  });

  it('asks the judge only for rules whose action and other conditions match, and only until a decision', async () => {
    const { asked, judge } = recordingJudge({ violated: true, category: 'DESTRUCTIVE', confidence: 0.9 });
    const decider = policy({ priority: 900, rules: [rule('decides', 'tool:shell', 'DENY')] });
    const semanticOther = policy({
      priority: 800,
      rules: [
        rule('other-action', 'llm:*', 'DENY', [{ field: 'input_text', operator: 'semantic', value: 'SUSPICIOUS' }]),
      ],
    });
    const semanticLater = policy({
      priority: 100,
      rules: [rule('later', 'tool:*', 'DENY', [{ field: 'input_text', operator: 'semantic', value: 'DESTRUCTIVE' }])],
    });
    const ruleset = compileRuleset([decider, semanticOther, semanticLater], 1);
    await evaluateAsync(ruleset, { action: 'tool:shell', context: { input_text: 'x' } }, judge);
    expect(asked).toHaveLength(0);
    const result = await evaluateAsync(ruleset, { action: 'tool:fs', context: { input_text: 'wipe it' } }, judge);
    expect(result.matched_rule).toBe('later');
    expect(asked).toEqual([
      { text: 'wipe it', intent: 'DESTRUCTIVE', field: 'input_text', context: { input_text: 'wipe it' } },
    ]);
  });

  it('treats a verdict below min_confidence as not violated', async () => {
    const p = policy({
      rules: [
        rule('strict', '*', 'DENY', [
          { field: 't', operator: 'semantic', value: { intent: 'DESTRUCTIVE', min_confidence: 0.9 } },
        ]),
      ],
    });
    const judge: SemanticJudge = {
      name: 'stub',
      version: '1',
      judge: () => Promise.resolve({ violated: true, confidence: 0.6 }),
    };
    expect((await evaluateAsync(compileRuleset([p], 1), { action: 'a', context: { t: 'x' } }, judge)).effect).toBe(
      'no_match',
    );
  });

  it('fails closed in synchronous evaluation and says so', () => {
    const ruleset = compileRuleset([destructive('DENY')], 1);
    const result = evaluate(ruleset, { action: 'tool:shell', context: { input_text: 'ls' } });
    expect(result).toMatchObject({ decision: 'DENY', allowed: false });
    expect(result.reason).toMatch(/not judged.*fail-closed/);
  });

  it('resolves a semantic condition on a value not known yet fail-closed, without asking the judge', async () => {
    const onWorkflow = (decision: PolicyRule['decision']) =>
      policy({
        name: `workflow-${decision}`,
        rules: [rule('w', 'llm:*', decision, [{ field: 'workflow_id', operator: 'semantic', value: 'FINANCE' }])],
      });
    const { asked, judge } = recordingJudge({ violated: false, confidence: 0.9 });
    const input = { action: 'llm:gpt-4o', context: { workflow_id: UNKNOWN_VALUE } };
    const denied = await evaluateAsync(compileRuleset([onWorkflow('DENY')], 1), input, judge);
    expect(denied).toMatchObject({ decision: 'DENY', matched_rule: 'w' });
    expect(denied.reason).toMatch(/workflow_id is not known yet.*fail-closed/);
    expect(evaluate(compileRuleset([onWorkflow('DENY')], 1), input).decision).toBe('DENY');
    expect((await evaluateAsync(compileRuleset([onWorkflow('ALLOW')], 1), input, judge)).effect).toBe('no_match');
    expect(asked).toEqual([]);
  });

  it('does not let an unjudged semantic condition allow', () => {
    const allow = policy({
      priority: 900,
      rules: [
        rule('safe', 'tool:*', 'ALLOW', [{ field: 'input_text', operator: 'semantic', value: 'benign maintenance' }]),
      ],
    });
    const deny = policy({ priority: 100, rules: [rule('deny', 'tool:*', 'DENY')] });
    const result = evaluate(compileRuleset([allow, deny], 1), {
      action: 'tool:x',
      context: { input_text: 'anything' },
    });
    expect(result).toMatchObject({ decision: 'DENY', matched_rule: 'deny' });
  });

  it('does not match a semantic condition on a missing field', async () => {
    const ruleset = compileRuleset([destructive('DENY')], 1);
    expect(evaluate(ruleset, { action: 'tool:shell', context: {} }).effect).toBe('no_match');
    expect(
      (
        await evaluateAsync(
          ruleset,
          { action: 'tool:shell', context: { input_text: 42 } },
          createBuiltinJudge({ maxTextChars: 65536, allowedHosts: [] }),
        )
      ).effect,
    ).toBe('no_match');
  });

  it('fails closed when the judge throws, returns garbage, or is too slow', async () => {
    const ruleset = compileRuleset([destructive('REQUIRE_APPROVAL')], 1);
    const input = { action: 'tool:shell', context: { input_text: 'ls' } };
    const throwing: SemanticJudge = {
      name: 'stub',
      version: '1',
      judge: () => Promise.reject(new Error('judge offline')),
    };
    const thrown = await evaluateAsync(ruleset, input, throwing);
    expect(thrown).toMatchObject({ decision: 'REQUIRE_APPROVAL', allowed: false });
    expect(thrown.reason).toMatch(/judge failed \(judge offline\)/);
    const garbage = { judge: () => Promise.resolve({ violated: 'no' }) } as unknown as SemanticJudge;
    expect((await evaluateAsync(ruleset, input, garbage)).decision).toBe('REQUIRE_APPROVAL');
    const slow: SemanticJudge = { name: 'stub', version: '1', judge: () => new Promise(() => undefined) };
    const timedOut = await evaluateAsync(ruleset, input, slow, { judgeTimeoutMs: 20 });
    expect(timedOut.decision).toBe('REQUIRE_APPROVAL');
    expect(timedOut.reason).toMatch(/timed out/);
  });

  it('answers rulesets without semantic conditions the same through evaluateAsync', async () => {
    const ruleset = compileRuleset([policy({ rules: [rule('d', 'tool:*', 'DENY')] })], 1);
    const judge: SemanticJudge = {
      name: 'stub',
      version: '1',
      judge: () => Promise.reject(new Error('must not be called')),
    };
    expect((await evaluateAsync(ruleset, { action: 'tool:a', context: {} }, judge)).decision).toBe('DENY');
  });
});

describe('semantic conditions judged in process', () => {
  const judge = createBuiltinJudge({ maxTextChars: 1024, allowedHosts: [] });
  const onArgs = (decision: PolicyRule['decision'], value: unknown = 'DESTRUCTIVE') =>
    compileRuleset(
      [
        policy({
          name: 'no-destruction',
          rules: [rule('semantic', 'tool:*', decision, [{ field: 'tool_args', operator: 'semantic', value }])],
        }),
      ],
      1,
    );

  it('denies a destructive tool call, naming the category and the evidence, and allows a benign one', () => {
    const ruleset = onArgs('DENY');
    const denied = evaluate(
      ruleset,
      {
        action: 'tool:delete_database',
        context: { tool_name: 'delete_database', tool_args: '{"sql":"DROP TABLE users"}' },
      },
      judge,
    );
    expect(denied).toMatchObject({ decision: 'DENY', semantic: { judge: 'builtin', category: 'DESTRUCTIVE' } });
    expect(denied.semantic?.evidence[0]).toMatchObject({
      field: 'tool_args.sql',
      start: 0,
      end: 10,
      excerpt: 'DROP TABLE',
    });
    expect(denied.reason).toContain('judged DESTRUCTIVE');
    expect(denied.reason).toContain('tool_args.sql[0,10)');
    const allowed = evaluate(
      ruleset,
      { action: 'tool:search', context: { tool_name: 'search', tool_args: '{"query":"weather in Paris"}' } },
      judge,
    );
    expect(allowed).toMatchObject({ decision: 'ALLOW', effect: 'no_match' });
    expect(allowed.semantic).toBeUndefined();
  });

  it('fails closed for a restrictive rule when the text is longer than the judge reads, and not for ALLOW', () => {
    const long = JSON.stringify({ note: 'x '.repeat(800) });
    const denied = evaluate(onArgs('DENY'), { action: 'tool:t', context: { tool_args: long } }, judge);
    expect(denied.decision).toBe('DENY');
    expect(denied.reason).toMatch(/beyond what the semantic judge reads.*fail-closed/);
    const allowRule = evaluate(onArgs('ALLOW'), { action: 'tool:t', context: { tool_args: long } }, judge);
    expect(allowRule.effect).toBe('no_match');
  });

  it('fails closed when a command lies past the values, the nesting or the scripts the judge reads', () => {
    const wide = createBuiltinJudge({ maxTextChars: 65_536, allowedHosts: [] });
    const rm = { command: 'rm -rf /var/lib/postgresql' };
    let nested: unknown = rm;
    for (let i = 0; i < 40; i++) nested = [nested];
    const deepScript = { command: `${'eval '.repeat(5)}${rm.command}` };
    for (const args of [{ padding: Array<string>(2000).fill(''), ...rm }, nested, deepScript]) {
      const input = { action: 'tool:bash', context: { tool_name: 'bash', tool_args: JSON.stringify(args) } };
      const denied = evaluate(onArgs('DENY'), input, wide);
      expect(denied.decision).toBe('DENY');
      expect(denied.reason).toMatch(/beyond what the semantic judge reads.*fail-closed/);
      expect(evaluate(onArgs('REQUIRE_APPROVAL'), input, wide).decision).toBe('REQUIRE_APPROVAL');
      expect(evaluate(onArgs('ALLOW'), input, wide).effect).toBe('no_match');
    }
  });

  it('judges a structured field as its JSON', () => {
    const ruleset = compileRuleset(
      [
        policy({
          rules: [rule('s', 'tool:*', 'DENY', [{ field: 'arguments', operator: 'semantic', value: 'DESTRUCTIVE' }])],
        }),
      ],
      1,
    );
    const result = evaluate(ruleset, { action: 'tool:sh', context: { arguments: { command: 'rm -rf /' } } }, judge);
    expect(result.semantic?.evidence[0]).toMatchObject({ field: 'arguments.command', signal: 'shell.rm_critical' });
  });

  it('judges a tenant category by its examples and refuses a malformed one when compiled', () => {
    const ruleset = onArgs('DENY', {
      intent: 'PAYROLL_ACCESS',
      description: 'reading salary data',
      examples: ['SELECT name, salary FROM payroll', 'export the payroll table'],
      counter_examples: ['SELECT name FROM employees'],
      min_confidence: 0.5,
    });
    const hit = evaluate(
      ruleset,
      { action: 'tool:sql', context: { tool_args: '{"q":"select name, salary from payroll where dept = 3"}' } },
      judge,
    );
    expect(hit).toMatchObject({ decision: 'DENY', semantic: { category: 'PAYROLL_ACCESS' } });
    const miss = evaluate(
      ruleset,
      { action: 'tool:sql', context: { tool_args: '{"q":"SELECT name FROM employees"}' } },
      judge,
    );
    expect(miss.effect).toBe('no_match');
    expect(() =>
      compileRuleset(
        [
          policy({
            rules: [
              rule('s', 'tool:*', 'DENY', [{ field: 'x', operator: 'semantic', value: { intent: 'X', examples: [] } }]),
            ],
          }),
        ],
        1,
      ),
    ).toThrow(/rules\.0\.conditions\.0\.value.*examples/);
  });
});

describe('judgesToolNames', () => {
  const judges = (rules: PolicyRule[], enforcement: Policy['enforcement'] = 'BLOCK') =>
    judgesToolNames(compileRuleset([policy({ enforcement, rules })], 1));

  it('finds a blocking DENY or REQUIRE_APPROVAL rule whose pattern matches some tool by name', () => {
    for (const action of [
      'tool:delete_repo',
      'TOOL:Delete_Repo',
      'tool:fs_*',
      'tool:*',
      '*',
      '*:delete',
      'to*',
      'tool:mcp*',
    ])
      expect(judges([rule('r', action, 'DENY')]), action).toBe(true);
    expect(
      judges([
        rule('r', 'tool:shell', 'REQUIRE_APPROVAL', [{ field: 'tool_args', operator: 'contains', value: 'rm' }]),
      ]),
    ).toBe(true);
    expect(judges([rule('r', 'tool:shell', 'DENY')], 'TERMINATE')).toBe(true);
    const declares = [{ field: 'declared_tools', operator: 'contains' as const, value: 'delete_repo' }];
    expect(judges([rule('l', 'llm:*', 'DENY', declares)])).toBe(true);
    const judged = [{ field: 'declared_tools', operator: 'semantic' as const, value: 'DESTRUCTIVE' }];
    expect(judges([rule('j', 'llm:*', 'REQUIRE_APPROVAL', judged)])).toBe(true);
    const first = [{ field: 'declared_tools.0', operator: 'eq' as const, value: 'delete_repo' }];
    expect(judges([rule('f', 'llm:*', 'DENY', first)])).toBe(true);
  });

  it('finds none in rules that only allow or warn, judge no tool, judge only the server, or only audit', () => {
    expect(judges([rule('a', 'tool:shell', 'ALLOW'), rule('w', 'tool:shell', 'WARN')])).toBe(false);
    expect(judges([rule('m', 'llm:*', 'DENY'), rule('n', 'network:*', 'DENY'), rule('t', 'tools:x', 'DENY')])).toBe(
      false,
    );
    expect(judges([rule('s', 'tool:mcp', 'DENY')])).toBe(false);
    expect(judges([rule('d', 'tool:delete_repo', 'DENY')], 'AUDIT')).toBe(false);
    expect(judges([rule('d', 'tool:delete_repo', 'DENY')], 'WARN')).toBe(false);
  });
});
