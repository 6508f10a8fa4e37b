import { z } from 'zod';
import { AuditQuerySchema, AuditRecordSchema } from '../../../core/domain/index.ts';
import type { AuditLog } from '../../audit/audit-log.ts';
import { LimitOrPagingQueryFields, nextPageHeaders, NextPageHeaders, pageOrLimit } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

const VerificationSchema = z.object({
  valid: z.boolean(),
  checked: z.number().int(),
  first_invalid_seq: z.number().int().nullable(),
  reason: z.string().nullable(),
});

export function auditRoutes(routes: RouteTable, audit: AuditLog): void {
  routes.add({
    method: 'GET',
    path: '/v1/audit',
    operationId: 'queryAudit',
    tag: 'audit',
    access: 'admin',
    summary:
      "The tenant's audit records, newest first, a page at a time (next page token in X-Next-Page-Token) or up to `limit`",
    query: AuditQuerySchema.extend(LimitOrPagingQueryFields),
    responses: {
      200: { description: 'audit records', schema: z.array(AuditRecordSchema), headers: NextPageHeaders },
    },
    handler: async ({ caller, query }) => {
      const filter = {
        action: query.action,
        resource_type: query.resource_type ?? query.resourceType,
        actor_id: query.actor_id ?? query.actorId,
      };
      const page = await pageOrLimit(query, audit.pages(caller.tenant, filter));
      return { status: 200, body: page.items, headers: nextPageHeaders(page.nextPageToken) };
    },
  });
  routes.add({
    method: 'GET',
    path: '/v1/audit/verify',
    operationId: 'verifyAudit',
    tag: 'audit',
    access: 'admin',
    summary: "Check the tenant's audit hash chain end to end",
    responses: { 200: { description: 'verification result', schema: VerificationSchema } },
    handler: async ({ caller }) => ({ status: 200, body: await audit.verify(caller.tenant) }),
  });
}
