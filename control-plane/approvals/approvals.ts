import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { timeOrderedUuid, type Actor } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { ApprovalMessage } from '../../core/events/messages.ts';
import type { ApprovalHoldRequest, ApprovalStanding } from '../../core/sync/contract.ts';
import {
  decideApproval,
  type Approval,
  type ApprovalStatus,
  type ApprovalVerdict,
  type EvaluationResult,
} from '../../core/policy/index.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { Effects } from '../effects/effects.ts';
import { filteredPage } from '../storage/filtered-page.ts';
import { collectPages } from '../storage/paging.ts';
import type { Page, PageRequest, Repositories, Storage } from '../storage/storage.ts';

const DEFAULT_LIST_LIMIT = 100;

export interface ApprovalDeps {
  storage: Storage;
  audit: AuditLog;
  effects: EffectDispatcher;
  clock: () => Date;
}

/** What a REQUIRE_APPROVAL decision was about. */
export interface ApprovalRequest {
  action: string;
  context: Record<string, unknown>;
  envelopeId?: string | undefined;
  result: EvaluationResult;
}

export interface ApprovalFilter {
  status?: ApprovalStatus | undefined;
  workflowId?: string | undefined;
  /** At most this many (default 100), oldest first. */
  limit?: number | undefined;
}

/**
 * Approvals (spec 3.4): the pending request a REQUIRE_APPROVAL decision opens, and its one
 * decision. Every surface (REST, gRPC, MCP) lists and decides through this service.
 */
export class Approvals {
  private readonly deps: ApprovalDeps;

  constructor(deps: ApprovalDeps) {
    this.deps = deps;
  }

  /**
   * Inside the deciding transaction: stores the PENDING approval (who asked, for what, why) and
   * queues its `approval.requested` event, so the approval exists exactly when the decision does.
   */
  async open(tx: Repositories, effects: Effects, caller: Caller, request: ApprovalRequest): Promise<Approval> {
    const at = this.deps.clock();
    return this.insert(tx, effects, {
      // Time-ordered, so that storage's id order is creation order (list).
      approval_id: timeOrderedUuid(at),
      tenant_id: caller.tenant,
      at,
      policy_id: request.result.matched_policy ?? '',
      rule_id: request.result.matched_rule ?? '',
      action: request.action,
      context: request.context,
      envelope_id: request.envelopeId ?? null,
      requested_by: actorOf(caller.principal),
      reason: request.result.message ?? request.result.reason,
    });
  }

  /**
   * A proxy holds a call for this approval: opens it under the id the proxy chose (time-ordered
   * there too), or answers how it stands when it exists, so a proxy that asks again (its answer
   * lost, the control plane restarted) never opens a second one. A request the proxy marks
   * `withdrawn` (its call ended undecided) rejects the approval if it is still pending and that
   * proxy opened it: no sidecar withdraws an approval another asked for, or one asked over REST.
   */
  async hold(tenant: string, request: ApprovalHoldRequest): Promise<ApprovalStanding> {
    const approval = await this.deps.effects.commit(async (tx, effects) => {
      const existing = await tx.approvals.get(tenant, request.approval_id);
      const current = existing ?? (await this.opened(tx, effects, tenant, request));
      if (request.withdrawn === undefined || current.status !== 'PENDING') return current;
      const opener = current.requested_by;
      if (opener?.type !== request.requested_by.type || opener.id !== request.requested_by.id) return current;
      return this.withdraw(tx, effects, current, request.requested_by, request.withdrawn);
    });
    return standing(approval);
  }

  private opened(tx: Repositories, effects: Effects, tenant: string, request: ApprovalHoldRequest): Promise<Approval> {
    return this.insert(tx, effects, {
      approval_id: request.approval_id,
      tenant_id: tenant,
      at: this.deps.clock(),
      policy_id: request.policy_id,
      rule_id: request.rule_id,
      action: request.action,
      context: request.context,
      envelope_id: request.envelope_id,
      requested_by: request.requested_by,
      reason: request.reason,
    });
  }

  /**
   * Rejects a pending approval whose held call ended undecided, in the name of the proxy that
   * held it: the spec's statuses have no other end than a decision. Audited and announced as a
   * decision is.
   */
  private async withdraw(
    tx: Repositories,
    effects: Effects,
    current: Approval,
    proxy: Actor,
    why: string,
  ): Promise<Approval> {
    const now = this.deps.clock().toISOString();
    const decided = await tx.approvals.decide(current.tenant_id, current.approval_id, {
      status: 'REJECTED',
      decided_at: now,
      reviewer_id: proxy.id,
      review_note: `withdrawn: ${why}`,
    });
    // Decided by a reviewer since it was read: that decision stands.
    if (decided === undefined) return (await tx.approvals.get(current.tenant_id, current.approval_id)) ?? current;
    await this.deps.audit.append(tx, current.tenant_id, {
      actor: proxy,
      action: 'approval.withdraw',
      resource: { type: 'approval', id: current.approval_id },
      result: 'rejected',
      metadata: { review_note: decided.review_note ?? null, action: decided.action, policy_id: decided.policy_id },
    });
    this.announce(effects, 'decided', decided, now);
    effects.decisions.push(standing(decided));
    return decided;
  }

  private async insert(
    tx: Repositories,
    effects: Effects,
    fields: Omit<Approval, 'status' | 'created_at' | 'envelope_id' | 'workflow_id' | 'requested_by' | 'reason'> & {
      at: Date;
      envelope_id: string | null;
      requested_by: Actor;
      reason: string;
    },
  ): Promise<Approval> {
    const now = fields.at.toISOString();
    const workflowId = fields.context.workflow_id;
    const approval: Approval = {
      approval_id: fields.approval_id,
      tenant_id: fields.tenant_id,
      status: 'PENDING',
      policy_id: fields.policy_id,
      rule_id: fields.rule_id,
      action: fields.action,
      context: fields.context,
      ...(fields.envelope_id !== null ? { envelope_id: fields.envelope_id } : {}),
      ...(typeof workflowId === 'string' ? { workflow_id: workflowId } : {}),
      requested_by: fields.requested_by,
      reason: fields.reason,
      created_at: now,
    };
    await tx.approvals.insert(fields.tenant_id, approval);
    this.announce(effects, 'requested', approval, now);
    return approval;
  }

  async get(tenant: string, approvalId: string): Promise<Approval> {
    const approval = await this.deps.storage.read.approvals.get(tenant, approvalId);
    if (approval === undefined) throw notFound(approvalId);
    return approval;
  }

  /**
   * Oldest first (id order: approvals are opened with time-ordered ids), at most `limit`: the
   * scan stops at the limit, so a long history of decided approvals is never held at once.
   */
  list(tenant: string, filter: ApprovalFilter = {}): Promise<Approval[]> {
    return collectPages((page) => this.page(tenant, filter, page), filter.limit ?? DEFAULT_LIST_LIMIT);
  }

  /**
   * A page of the approvals the filter keeps, oldest first, in storage's own tokens. Storage lists
   * one status alone; a page filtered by workflow that stopped at the bound on approvals one
   * filtered page reads is short and carries the token to read on.
   */
  page(tenant: string, filter: Omit<ApprovalFilter, 'limit'>, request: PageRequest): Promise<Page<Approval>> {
    return filteredPage(
      (page) => this.deps.storage.read.approvals.list(tenant, { status: filter.status }, page),
      (a) => (filter.workflowId === undefined || a.workflow_id === filter.workflowId ? a : undefined),
      (a) => [a.approval_id],
      request,
    );
  }

  /**
   * Approves or rejects a PENDING approval once: a second decision, even a concurrent one, is
   * SVC-POL-2006; an unknown id SVC-POL-2005; the credential that asked for it deciding it is
   * SVC-SYS-9004, since an approval is a second party's check on the first. The reviewer recorded
   * is the deciding credential, whatever name a request gives, so no caller can enter another as
   * the one who decided. Audited with the caller as actor, announced with `approval.decided`.
   */
  async decide(caller: Caller, approvalId: string, verdict: ApprovalVerdict): Promise<Approval> {
    const now = this.deps.clock();
    const decision = { ...verdict, reviewer_id: caller.principal.id };
    return this.deps.effects.commit(async (tx, effects) => {
      const current = await tx.approvals.get(caller.tenant, approvalId);
      if (current === undefined) throw notFound(approvalId);
      if (current.status === 'PENDING' && sameActor(current.requested_by, actorOf(caller.principal)))
        throw decidedByRequester(approvalId);
      const wanted = decideApproval(current, { ...decision, now });
      const decided = await tx.approvals.decide(caller.tenant, approvalId, {
        status: wanted.status,
        decided_at: wanted.decided_at,
        reviewer_id: wanted.reviewer_id,
        review_note: wanted.review_note,
      });
      if (decided === undefined) {
        // Decided by another transaction since it was read: the refusal names that decision.
        const latest = await tx.approvals.get(caller.tenant, approvalId);
        if (latest !== undefined) decideApproval(latest, { ...decision, now });
        throw notFound(approvalId);
      }
      const approval = decided;
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: approval.status === 'APPROVED' ? 'approval.approve' : 'approval.reject',
        resource: { type: 'approval', id: approvalId },
        result: approval.status.toLowerCase(),
        metadata: {
          reviewer_id: approval.reviewer_id,
          review_note: approval.review_note ?? null,
          action: approval.action,
          policy_id: approval.policy_id,
        },
      });
      this.announce(effects, 'decided', approval, now.toISOString());
      effects.decisions.push(standing(approval));
      return approval;
    });
  }

  private announce(effects: Effects, what: 'requested' | 'decided', approval: Approval, at: string): void {
    const message: ApprovalMessage = { tenant_id: approval.tenant_id, approval, occurred_at: at };
    effects.publications.push({
      subject:
        what === 'requested'
          ? subjects.approvalRequested(approval.tenant_id)
          : subjects.approvalDecided(approval.tenant_id),
      data: message,
      msgId: msgIds.approval(approval.tenant_id, what, approval.approval_id),
    });
  }
}

function standing(approval: Approval): ApprovalStanding {
  return {
    tenant_id: approval.tenant_id,
    approval_id: approval.approval_id,
    status: approval.status,
    reviewer_id: approval.reviewer_id ?? null,
    review_note: approval.review_note ?? null,
  };
}

/** The same credential: requester and caller are recorded alike (`actorOf`), kind and id. */
function sameActor(a: Actor | undefined, b: Actor): boolean {
  return a !== undefined && a.type === b.type && a.id === b.id;
}

function decidedByRequester(approvalId: string): SvcError {
  return new SvcError(
    'SVC-SYS-9004',
    `approval ${approvalId} was requested by this credential; another credential must decide it`,
    { approval_id: approvalId, reason: 'requester_cannot_decide' },
  );
}

function notFound(approvalId: string): SvcError {
  return new SvcError('SVC-POL-2005', `approval ${approvalId} not found`, { approval_id: approvalId });
}
