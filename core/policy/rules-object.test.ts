import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors/index.ts';
import { faultsByRuleId, rulesFromObject, RulesObjectInputSchema } from './rules-object.ts';

describe('faultsByRuleId', () => {
  const fault = (...fields: string[]) =>
    new SvcError(
      'SVC-POL-2003',
      `invalid policy "p": ${fields.map((f) => `${f}: bad`).join('; ')}`,
      { policy_id: 'x', fields: fields.join(', ') },
      fields.map((field) => ({ field, description: 'bad' })),
    );

  it('names a rule by its id, in the message, the details and the violations', () => {
    const renamed = faultsByRuleId(fault('rules.1.conditions.0.value', 'name'), () => ['a', 'b']);
    expect(renamed.code).toBe('SVC-POL-2003');
    expect(renamed.fieldViolations.map((v) => v.field)).toEqual(['rules.b.conditions.0.value', 'name']);
    expect(renamed.message).toBe('invalid policy "p": rules.b.conditions.0.value: bad; name: bad');
    expect(renamed.details).toEqual({ policy_id: 'x', fields: 'rules.b.conditions.0.value, name' });
  });

  it('keeps the index of an imported policy and asks for that policy’s rule ids', () => {
    const ids: Record<number, string[]> = { 0: ['first'], 2: ['x', 'y'] };
    const renamed = faultsByRuleId(fault('2.rules.1.action', '0.rules.0'), (i) => (i === null ? undefined : ids[i]));
    expect(renamed.fieldViolations.map((v) => v.field)).toEqual(['2.rules.y.action', '0.rules.first']);
  });

  it('leaves what it cannot name as it is', () => {
    const error = fault('rules.5.action', 'rules.10x');
    expect(faultsByRuleId(error, () => ['a'])).toBe(error);
    expect(faultsByRuleId(error, () => undefined)).toBe(error);
  });
});

describe('RulesObjectInputSchema', () => {
  it('keeps the rules in the order written, and refuses rule ids a JSON object would read first', () => {
    const text =
      '{"block-shell": {"action": "tool:shell", "effect": "deny"}, "allow-rest": {"action": "tool:*", "effect": "allow"}}';
    const rules = rulesFromObject(RulesObjectInputSchema.parse(JSON.parse(text)));
    expect(rules?.map((r) => r.rule_id)).toEqual(['block-shell', 'allow-rest']);
    const numbered = RulesObjectInputSchema.safeParse(
      JSON.parse(
        '{"block-shell": {"action": "tool:shell", "effect": "deny"}, "2": {"action": "tool:*", "effect": "allow"}, "0": {"action": "x", "effect": "allow"}}',
      ),
    );
    expect(numbered.success).toBe(false);
    expect(numbered.error?.issues.map((i) => i.path.join('.'))).toEqual(['0', '2']);
    // Not an array index, so kept in place: a leading zero, a sign, a fraction.
    for (const id of ['02', '-1', '1.5', 'rule-2'])
      expect(RulesObjectInputSchema.safeParse({ [id]: { action: 'x', effect: 'deny' } }).success, id).toBe(true);
  });
});
