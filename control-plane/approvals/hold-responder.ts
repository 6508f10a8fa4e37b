import type { Messaging, Subscription } from '../../core/bus/bus.ts';
import { parseOrThrow } from '../../core/errors/index.ts';
import { ApprovalHoldRequestSchema, type ApprovalStanding } from '../../core/sync/contract.ts';
import { subjectTenant } from '../sync/subject-tenant.ts';
import type { Approvals } from './approvals.ts';

/** Answers the proxies that hold a call for an approval: opens it, or says how it stands. */
export async function serveApprovalHolds(deps: { messaging: Messaging; approvals: Approvals }): Promise<Subscription> {
  return deps.messaging.requests.reply('svc.*.approvals.request', async (data, subject): Promise<ApprovalStanding> => {
    const request = parseOrThrow(ApprovalHoldRequestSchema, data, 'approval hold request');
    return deps.approvals.hold(subjectTenant(subject, request.tenant_id, 'approval hold request'), request);
  });
}
