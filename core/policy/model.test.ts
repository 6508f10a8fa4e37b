import { describe, expect, it } from 'vitest';
import { DecisionInputSchema, EnforcementInputSchema, OperatorInputSchema, PolicyStatusInputSchema } from './model.ts';

describe('canonical enum inputs', () => {
  it.each([
    ['eq', 'eq'],
    ['EQUALS', 'eq'],
    ['not_equals', 'neq'],
    ['NEQ', 'neq'],
    ['CONTAINS', 'contains'],
    ['REGEX', 'matches'],
    ['matches', 'matches'],
    ['GREATER_THAN', 'gt'],
    ['gte', 'gte'],
    ['LESS_THAN', 'lt'],
    ['lte', 'lte'],
    ['IN', 'in'],
    ['not_in', 'not_in'],
    ['SEMANTIC', 'semantic'],
    ['CONDITION_OPERATOR_IN', 'in'],
    ['condition_operator_equals', 'eq'],
    ['CONDITION_OPERATOR_REGEX', 'matches'],
    ['Greater_Than_Or_Equal', 'gte'],
  ])('operator %s → %s', (input, canonical) => {
    expect(OperatorInputSchema.parse(input)).toBe(canonical);
  });

  it('refuses unknown operators', () => {
    expect(OperatorInputSchema.safeParse('LIKE').success).toBe(false);
  });

  it('maps statuses, enforcement levels and decisions from every surface', () => {
    expect(PolicyStatusInputSchema.parse('POLICY_STATUS_ACTIVE')).toBe('ACTIVE');
    expect(PolicyStatusInputSchema.parse('inactive')).toBe('DISABLED');
    expect(PolicyStatusInputSchema.parse('draft')).toBe('DRAFT');
    expect(EnforcementInputSchema.parse('ENFORCEMENT_LEVEL_TERMINATE')).toBe('TERMINATE');
    expect(EnforcementInputSchema.parse('audit')).toBe('AUDIT');
    expect(DecisionInputSchema.parse('deny')).toBe('DENY');
    expect(DecisionInputSchema.parse('EVALUATION_DECISION_REQUIRE_APPROVAL')).toBe('REQUIRE_APPROVAL');
    expect(DecisionInputSchema.parse('ACTION_TYPE_DENY')).toBe('DENY');
    expect(DecisionInputSchema.safeParse('maybe').success).toBe(false);
  });
});
