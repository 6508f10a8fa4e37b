import { z } from 'zod';
import { ActorSchema } from '../domain/audit.ts';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import { TimestampSchema } from '../domain/timestamp.ts';

export const ApprovalStatusSchema = z.enum(['PENDING', 'APPROVED', 'REJECTED']);
export type ApprovalStatus = z.infer<typeof ApprovalStatusSchema>;

/** A request for a human decision, created when a rule decides REQUIRE_APPROVAL (spec 3.4). */
export const ApprovalSchema = z.object({
  approval_id: z.string().min(1),
  tenant_id: z.string().min(1),
  status: ApprovalStatusSchema,
  policy_id: z.string(),
  rule_id: z.string(),
  action: z.string(),
  context: z.record(z.string(), z.unknown()),
  envelope_id: z.string().optional(),
  /** `context.workflow_id` when the action named one: what reviewers filter their queue by. */
  workflow_id: z.string().optional(),
  /** Who asked for the action (absent on approvals stored before it was recorded). */
  requested_by: ActorSchema.optional(),
  /** Why approval is needed: the matched rule's message or the engine's reason. */
  reason: z.string().optional(),
  created_at: TimestampSchema,
  decided_at: TimestampSchema.optional(),
  reviewer_id: z.string().optional(),
  review_note: z.string().optional(),
});
export type Approval = z.infer<typeof ApprovalSchema>;

/** What a reviewer decides. Who reviewed is never taken from a request: it is the deciding credential. */
export const ApprovalVerdictSchema = z.object({
  status: z.enum(['APPROVED', 'REJECTED']),
  review_note: z.string().optional(),
});
export type ApprovalVerdict = z.infer<typeof ApprovalVerdictSchema>;

export const ApprovalDecisionSchema = ApprovalVerdictSchema.extend({ reviewer_id: z.string().trim().min(1) });
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema> & { readonly now: Date };

/**
 * The decided approval. Refuses a second decision with SVC-POL-2006, and a bad decision
 * (status PENDING, no reviewer) with SVC-SYS-9002 naming the field.
 */
export function decideApproval(approval: Approval, decision: ApprovalDecision): Approval {
  if (approval.status !== 'PENDING') {
    throw new SvcError(
      'SVC-POL-2006',
      `approval ${approval.approval_id} was already ${approval.status.toLowerCase()}`,
      {
        approval_id: approval.approval_id,
        status: approval.status,
        decided_at: approval.decided_at,
      },
    );
  }
  const { status, reviewer_id, review_note } = parseOrThrow(ApprovalDecisionSchema, decision, 'approval decision');
  return {
    ...approval,
    status,
    decided_at: decision.now.toISOString(),
    reviewer_id,
    ...(review_note === undefined ? {} : { review_note }),
  };
}
