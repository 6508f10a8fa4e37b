import { describe, expect, it } from 'vitest';
import type { Policy } from './model.ts';
import { revisePolicy } from './revise-policy.ts';

const original: Policy = {
  policy_id: '5f1e2d3c-2222-4b6a-9c8d-abcdefabcdef',
  tenant_id: 'tenant-a',
  name: 'guard',
  description: '',
  priority: 100,
  status: 'ACTIVE',
  enforcement: 'BLOCK',
  rules: [{ rule_id: 'r1', name: 'r1', action: 'tool:*', decision: 'DENY', conditions: [] }],
  tags: {},
  version: 3,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-02T00:00:00.000Z',
};
const now = new Date('2026-02-01T00:00:00.000Z');

describe('revisePolicy', () => {
  it('applies changes, bumps the version and the update time, keeps identity', () => {
    const revised = revisePolicy(original, { priority: 900, status: 'DISABLED', description: undefined }, now);
    expect(revised).toEqual({
      ...original,
      priority: 900,
      status: 'DISABLED',
      version: 4,
      updated_at: '2026-02-01T00:00:00.000Z',
    });
    expect(original.version).toBe(3);
  });

  it('ignores attempts to change identity fields', () => {
    const sneaky = { policy_id: 'other', tenant_id: 'tenant-b', version: 99 } as unknown as Parameters<
      typeof revisePolicy
    >[1];
    expect(revisePolicy(original, sneaky, now)).toMatchObject({
      policy_id: original.policy_id,
      tenant_id: 'tenant-a',
      version: 4,
    });
  });

  it('refuses rules that cannot compile with SVC-POL-2003', () => {
    const rules = [
      {
        rule_id: 'r1',
        name: 'r1',
        action: 'tool:*',
        decision: 'DENY' as const,
        conditions: [{ field: 'x', operator: 'in' as const, value: 'a' }],
      },
    ];
    expect(() => revisePolicy(original, { rules }, now)).toThrow(
      expect.objectContaining({
        code: 'SVC-POL-2003',
        fieldViolations: [expect.objectContaining({ field: 'rules.0.conditions.0.value' })],
      }),
    );
  });
});
