import { describe, expect, it } from 'vitest';
import type { SvcError } from '../errors/index.ts';
import { ApprovalSchema, decideApproval, type Approval } from './approvals.ts';

const pending: Approval = ApprovalSchema.parse({
  approval_id: 'ap-1',
  tenant_id: 'tenant-a',
  status: 'PENDING',
  policy_id: 'p-1',
  rule_id: 'r-1',
  action: 'tool:payment',
  context: { amount: 500 },
  envelope_id: 'env-1',
  created_at: '2026-01-01T00:00:00.000Z',
});
const now = new Date('2026-01-01T00:05:00.000Z');

describe('an approval record', () => {
  it('keeps its times in the canonical form, as every other record', () => {
    const written = ApprovalSchema.parse({ ...pending, created_at: '2026-01-01T01:00:00+01:00' });
    expect(written.created_at).toBe('2026-01-01T00:00:00.000Z');
    expect(ApprovalSchema.safeParse({ ...pending, decided_at: '9999-12-31T23:59:59-00:01' }).success).toBe(false);
  });
});

describe('decideApproval', () => {
  it('approves a pending approval, recording reviewer, note and time', () => {
    const decided = decideApproval(pending, { status: 'APPROVED', reviewer_id: 'alice', review_note: 'ok', now });
    expect(decided).toEqual({
      ...pending,
      status: 'APPROVED',
      reviewer_id: 'alice',
      review_note: 'ok',
      decided_at: '2026-01-01T00:05:00.000Z',
    });
    expect(pending.status).toBe('PENDING');
  });

  it('rejects without a note', () => {
    const decided = decideApproval(pending, { status: 'REJECTED', reviewer_id: 'bob', now });
    expect(decided.status).toBe('REJECTED');
    expect(decided).not.toHaveProperty('review_note');
  });

  it('refuses to decide twice with SVC-POL-2006', () => {
    const decided = decideApproval(pending, { status: 'APPROVED', reviewer_id: 'alice', now });
    expect(() => decideApproval(decided, { status: 'REJECTED', reviewer_id: 'bob', now })).toThrow(
      expect.objectContaining({
        code: 'SVC-POL-2006',
        details: { approval_id: 'ap-1', status: 'APPROVED', decided_at: '2026-01-01T00:05:00.000Z' },
      }),
    );
  });

  it('refuses a bad decision naming the field', () => {
    const attempt = (decision: Parameters<typeof decideApproval>[1]) => {
      try {
        decideApproval(pending, decision);
      } catch (error) {
        return error as SvcError;
      }
      throw new Error('expected a refusal');
    };
    const pendingAgain = attempt({ status: 'PENDING' as 'APPROVED', reviewer_id: 'alice', now });
    expect(pendingAgain.code).toBe('SVC-SYS-9002');
    expect(pendingAgain.fieldViolations.map((v) => v.field)).toEqual(['status']);
    expect(attempt({ status: 'APPROVED', reviewer_id: '  ', now }).fieldViolations.map((v) => v.field)).toEqual([
      'reviewer_id',
    ]);
  });
});
