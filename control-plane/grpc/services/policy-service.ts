import {
  ApprovalVerdictSchema,
  policyFromRestCreate,
  withRuleType,
  type Approval,
  type Decision,
  type EvaluationResult,
  type Policy,
  type PolicyChanges,
  type RuleType,
} from '../../../core/policy/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import { MAX_LIST_ITEMS } from '../../../core/domain/bounds.ts';
import type { Approvals } from '../../approvals/approvals.ts';
import type { Caller } from '../../caller.ts';
import type { Policies } from '../../policies/policies.ts';
import { policyPage } from '../../policies/policy-page.ts';
import { grpcNextPageToken, grpcPageRequest } from '../codec/paging.ts';
import { evaluationQuestions, policyCreateInput, toGrpcEvaluationResult, toGrpcPolicy } from '../codec/policy-codec.ts';
import {
  enumValue,
  fromTimestamp,
  invalidField,
  present,
  requiredId,
  toStruct,
  toTimestamp,
} from '../codec/well-known.ts';
import type { GrpcRequest, GrpcServiceHandlers } from '../server.ts';

/** The policy fields an update_mask may name; an empty mask names them all. */
const UPDATABLE = ['name', 'description', 'rules', 'priority', 'status', 'enforcement', 'tags'] as const;

/**
 * The changes an UpdatePolicyRequest asks for. The masked fields of the given policy are laid
 * over the stored one and the whole is read as a create request would be, so a changed field is
 * validated (and a rule compiled) exactly as on create; an empty mask replaces every field.
 */
function policyChanges(current: Policy, request: GrpcRequest, now: Date): PolicyChanges {
  const given = request.policy as Record<string, unknown>;
  const paths = ((request.update_mask as { paths?: string[] } | null)?.paths ?? []).map((p) => p.trim());
  for (const path of paths) {
    if (!(UPDATABLE as readonly string[]).includes(path))
      throw invalidField('update_mask', `${path} cannot be changed; one of ${UPDATABLE.join(', ')}`);
  }
  const masked = paths.length === 0 ? [...UPDATABLE] : paths;
  const merged: Record<string, unknown> = { ...toGrpcPolicy(current) };
  for (const field of masked) merged[field] = given[field];
  const input = policyCreateInput(merged);
  const revised = policyFromRestCreate(input, { tenantId: current.tenant_id, policyId: current.policy_id, now });
  return Object.fromEntries(masked.map((field) => [field, revised[field as keyof Policy]]));
}

/** A canonical approval as svc.policy.v1.Approval. */
export function toGrpcApproval(approval: Approval) {
  return {
    approval_id: approval.approval_id,
    tenant_id: approval.tenant_id,
    status: `APPROVAL_STATUS_${approval.status}`,
    policy_id: approval.policy_id,
    rule_id: approval.rule_id,
    action: approval.action,
    context: toStruct(approval.context),
    envelope_id: approval.envelope_id ?? '',
    created_at: toTimestamp(approval.created_at),
    decided_at: toTimestamp(approval.decided_at),
    reviewer_id: approval.reviewer_id ?? '',
    review_note: approval.review_note ?? '',
  };
}

/** The stricter of two decisions wins when one context asks about several tools. */
const STRICTNESS: Record<Decision, number> = { ALLOW: 0, WARN: 1, REQUIRE_APPROVAL: 2, DENY: 3 };

type Message = Record<string, unknown>;

/**
 * Decides every action the context implies against `policySet` (every policy when undefined)
 * and keeps the strictest decision with its pending approval.
 */
async function decideAll(
  policies: Policies,
  caller: Caller,
  request: GrpcRequest,
  policySet: string[] | undefined,
): Promise<{ result: EvaluationResult; approvalId: string | null }> {
  const question = evaluationQuestions(request.context as Message | null);
  let strictest: { result: EvaluationResult; approvalId: string | null } | undefined;
  for (const action of question.actions) {
    const decision = await policies.decide(caller, {
      action,
      context: question.context,
      policySet,
      envelopeId: question.envelopeId,
      dryRun: request.dry_run === true,
    });
    if (strictest === undefined || STRICTNESS[decision.result.decision] > STRICTNESS[strictest.result.decision])
      strictest = decision;
  }
  return strictest as { result: EvaluationResult; approvalId: string | null };
}

async function byId(policies: Policies, tenant: string): Promise<Map<string, Policy>> {
  return new Map((await policies.list(tenant)).map((p) => [p.policy_id, p]));
}

/** svc.policy.v1.PolicyService over the policy service REST uses. */
export function policyService(policies: Policies, approvals: Approvals, clock: () => Date): GrpcServiceHandlers {
  return {
    CreatePolicy: {
      largeRequest: true,
      access: 'policies:write',
      tenantField: 'policy.tenant_id',
      handle: async (request, { caller }) => ({
        policy: toGrpcPolicy(await policies.create(caller, policyCreateInput(request.policy as Message | null))),
      }),
    },
    GetPolicy: {
      access: 'policies:read',
      handle: async (request, { caller }) => ({
        policy: toGrpcPolicy(await policies.get(caller.tenant, requiredId(request, 'policy_id'))),
      }),
    },
    UpdatePolicy: {
      largeRequest: true,
      access: 'policies:write',
      tenantField: 'policy.tenant_id',
      handle: async (request, { caller }) => {
        if (request.policy === null) throw invalidField('policy', 'required');
        const policyId = requiredId(request.policy as GrpcRequest, 'policy_id');
        const current = await policies.get(caller.tenant, policyId);
        const changes = policyChanges(current, request, clock());
        return { policy: toGrpcPolicy(await policies.update(caller, policyId, changes)) };
      },
    },
    DeletePolicy: {
      access: 'policies:write',
      handle: async (request, { caller }) => {
        await policies.remove(caller, requiredId(request, 'policy_id'));
        return {};
      },
    },
    ListPolicies: {
      access: 'policies:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const status = enumValue(request.status, 'POLICY_STATUS_') as Policy['status'] | undefined;
        const ruleType = enumValue(request.rule_type, 'RULE_TYPE_') as RuleType | undefined;
        const listed = withRuleType(await policies.list(caller.tenant, { status }), ruleType);
        const page = policyPage(listed, grpcPageRequest(request));
        return { policies: page.items.map(toGrpcPolicy), next_page_token: grpcNextPageToken(page) };
      },
    },
    EvaluatePolicy: {
      largeRequest: true,
      access: 'policies:read',
      tenantField: 'context.tenant_id',
      handle: async (request, { caller }) => {
        const policy = await policies.get(caller.tenant, requiredId(request, 'policy_id'));
        const { result, approvalId } = await decideAll(policies, caller, request, [policy.policy_id]);
        return { result: toGrpcEvaluationResult(result, new Map([[policy.policy_id, policy]]), approvalId) };
      },
    },
    EvaluatePolicies: {
      largeRequest: true,
      access: 'policies:read',
      tenantField: 'context.tenant_id',
      handle: async (request, { caller }) => {
        const listed = request.policy_ids as string[];
        if (listed.length > MAX_LIST_ITEMS) throw invalidField('policy_ids', `at most ${MAX_LIST_ITEMS} items`);
        const ids = [...new Set(listed)];
        const known = await byId(policies, caller.tenant);
        for (const id of ids) await policies.get(caller.tenant, id);
        const order = (ids.length > 0 ? ids.map((id) => known.get(id) as Policy) : [...known.values()])
          .filter((p) => ids.length > 0 || p.status === 'ACTIVE')
          .sort((a, b) => b.priority - a.priority);
        // Each policy's own answer is decided without effects; the consolidated decision over
        // all of them is the one recorded (audit, violation event, pending approval).
        const results = [];
        for (const policy of order) {
          const one = await decideAll(policies, caller, { ...request, dry_run: true }, [policy.policy_id]);
          results.push(toGrpcEvaluationResult(one.result, known, null));
          if (request.stop_on_deny === true && one.result.decision === 'DENY') break;
        }
        const final = await decideAll(
          policies,
          caller,
          request,
          order.map((p) => p.policy_id),
        );
        const consolidated = toGrpcEvaluationResult(final.result, known, final.approvalId);
        return { results, final_decision: consolidated.decision, actions: consolidated.actions };
      },
    },
    GetEvaluationHistory: {
      access: 'policies:read',
      handle: async (request, { caller }) => {
        const page = await policies.evaluations(
          caller.tenant,
          requiredId(request, 'policy_id'),
          {
            start: fromTimestamp(request.start_time, 'start_time'),
            end: fromTimestamp(request.end_time, 'end_time'),
            decision: enumValue(request.decision, 'EVALUATION_DECISION_') as Decision | undefined,
          },
          grpcPageRequest(request),
        );
        return {
          evaluations: page.items.map((r) => ({
            evaluation_id: r.evaluation_id,
            evaluated_at: toTimestamp(r.evaluated_at),
            policy_id: r.policy_id,
            rule_id: r.rule_id,
            action: r.action,
            decision: `EVALUATION_DECISION_${r.decision}`,
            shadow: r.shadow,
            envelope_id: r.envelope_id ?? '',
            approval_id: r.approval_id ?? '',
            actor_type: r.actor.type,
            actor_id: r.actor.id,
          })),
          next_page_token: grpcNextPageToken(page),
        };
      },
    },
    ListApprovals: {
      access: 'policies:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const status = enumValue(request.status, 'APPROVAL_STATUS_') as Approval['status'] | undefined;
        const page = await approvals.page(caller.tenant, { status }, grpcPageRequest(request));
        return { approvals: page.items.map(toGrpcApproval), next_page_token: grpcNextPageToken(page) };
      },
    },
    UpdateApproval: {
      access: 'policies:write',
      handle: async (request, { caller }) => {
        // reviewer_id stays on the wire (spec 4.6) but is not read: the reviewer is the caller.
        const verdict = parseOrThrow(
          ApprovalVerdictSchema,
          {
            status: enumValue(request.status, 'APPROVAL_STATUS_'),
            ...(present(request.review_note) === undefined ? {} : { review_note: request.review_note }),
          },
          'request',
        );
        return {
          approval: toGrpcApproval(await approvals.decide(caller, requiredId(request, 'approval_id'), verdict)),
        };
      },
    },
  };
}
