import { z } from 'zod';
import { MAX_NAME_LENGTH, PathIdSchema, TenantIdSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import { ApprovalSchema, ApprovalStatusSchema } from '../../../core/policy/index.ts';
import type { Approvals } from '../../approvals/approvals.ts';
import { LimitOrPagingQueryFields, nextPageHeaders, NextPageHeaders, pageOrLimit } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

const ApprovalParams = z.object({ approval_id: PathIdSchema });
const ListQuery = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  status: ApprovalStatusSchema.optional(),
  workflow_id: z.string().max(MAX_NAME_LENGTH).optional(),
  workflowId: z.string().max(MAX_NAME_LENGTH).optional(),
  ...LimitOrPagingQueryFields,
});
/** UpdateApproval of spec 4.6; the decision is final. */
const DecisionBody = z.object({
  tenant_id: TenantIdSchema.optional(),
  status: z.enum(['APPROVED', 'REJECTED']),
  reviewer_id: z
    .string()
    .max(MAX_NAME_LENGTH)
    .optional()
    .describe('accepted as spec 4.6 names it, and ignored: the reviewer recorded is the deciding credential'),
  review_note: z.string().max(4096).optional(),
});
const notFound = { description: 'approval not found (SVC-POL-2005)', schema: ErrorBodySchema };

/** ListApprovals and UpdateApproval of spec 4.6, plus reading one approval. */
export function approvalRoutes(routes: RouteTable, approvals: Approvals): void {
  routes.add({
    method: 'GET',
    path: '/v1/approvals',
    operationId: 'listApprovals',
    tag: 'approvals',
    access: 'policies:read',
    summary:
      "The tenant's approvals, oldest first, by status and workflow, a page at a time (next page token in X-Next-Page-Token) or up to `limit`",
    query: ListQuery,
    responses: { 200: { description: 'approvals', schema: z.array(ApprovalSchema), headers: NextPageHeaders } },
    handler: async ({ caller, query }) => {
      const filter = { status: query.status, workflowId: query.workflow_id ?? query.workflowId };
      const page = await pageOrLimit(query, (p) => approvals.page(caller.tenant, filter, p));
      return { status: 200, body: page.items, headers: nextPageHeaders(page.nextPageToken) };
    },
  });
  routes.add({
    method: 'GET',
    path: '/v1/approvals/{approval_id}',
    operationId: 'getApproval',
    tag: 'approvals',
    access: 'policies:read',
    summary: 'Read an approval',
    params: ApprovalParams,
    responses: { 200: { description: 'the approval', schema: ApprovalSchema }, 404: notFound },
    handler: async ({ caller, params }) => ({
      status: 200,
      body: await approvals.get(caller.tenant, params.approval_id),
    }),
  });
  routes.add({
    method: 'PATCH',
    path: '/v1/approvals/{approval_id}',
    operationId: 'updateApproval',
    tag: 'approvals',
    access: 'policies:write',
    summary: 'Approve or reject a pending approval, once',
    params: ApprovalParams,
    body: DecisionBody,
    responses: {
      200: { description: 'the decided approval', schema: ApprovalSchema },
      404: notFound,
      409: { description: 'already approved or rejected (SVC-POL-2006)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, params, body }) => ({
      status: 200,
      body: await approvals.decide(caller, params.approval_id, { status: body.status, review_note: body.review_note }),
    }),
  });
}
