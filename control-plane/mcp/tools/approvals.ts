import { z } from 'zod';
import { MAX_TEXT_LENGTH } from '../../../core/domain/index.ts';
import { ApprovalSchema, type Approval } from '../../../core/policy/index.ts';
import type { Caller } from '../../caller.ts';
import type { McpServices } from '../services.ts';
import { defineTool, hints, type McpTool } from '../tool.ts';

const ApprovalId = z.object({ approval_id: z.string().min(1).max(100) });
const Decided = z.object({ approval: ApprovalSchema, message: z.string() });

export function approvalTools(s: McpServices): McpTool[] {
  const decide = async (caller: Caller, id: string, status: 'APPROVED' | 'REJECTED', note: string | undefined) => {
    const approval: Approval = await s.approvals.decide(caller, id, { status, review_note: note });
    const message = `approval ${id} ${status.toLowerCase()} by ${approval.reviewer_id ?? caller.principal.id}`;
    return { text: message, data: { approval, message } };
  };
  return [
    defineTool({
      name: 'list_pending_approvals',
      title: 'Pending approvals',
      description: 'Actions waiting for a human decision, oldest first, optionally of one workflow.',
      scope: 'policies:read',
      hints: hints.read,
      input: z.object({
        workflow_id: z.string().max(200).optional(),
        limit: z.int().min(1).max(1000).default(50),
      }),
      output: z.object({ approvals: z.array(ApprovalSchema) }),
      run: async (caller, input) => {
        const approvals = await s.approvals.list(caller.tenant, {
          status: 'PENDING',
          workflowId: input.workflow_id,
          limit: input.limit,
        });
        return { text: `${approvals.length} pending approvals`, data: { approvals } };
      },
    }),
    defineTool({
      name: 'approve_action',
      title: 'Approve an action',
      description: 'Approves a pending approval; a decision is final.',
      scope: 'policies:write',
      hints: hints.change,
      input: ApprovalId.extend({ comment: z.string().max(MAX_TEXT_LENGTH).optional() }),
      output: Decided,
      run: (caller, input) => decide(caller, input.approval_id, 'APPROVED', input.comment),
    }),
    defineTool({
      name: 'deny_action',
      title: 'Deny an action',
      description: 'Rejects a pending approval, with the reason; a decision is final.',
      scope: 'policies:write',
      hints: hints.change,
      input: ApprovalId.extend({ reason: z.string().trim().min(1).max(MAX_TEXT_LENGTH) }),
      output: Decided,
      run: (caller, input) => decide(caller, input.approval_id, 'REJECTED', input.reason),
    }),
  ];
}
