import { z } from 'zod';
import { PathIdSchema, TenantIdSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import {
  PolicyStatusInputSchema,
  RestCreatePolicyRequestSchema,
  RestPolicyEvaluationRequestSchema,
  RestPolicyEvaluationResultSchema,
  RestPolicySchema,
  RuleTypeInputSchema,
  toRestEvaluationResult,
  toRestPolicy,
  withRuleType,
  type PolicyStatus,
} from '../../../core/policy/index.ts';
import type { PolicyDecision } from '../../envelopes/policy-gate.ts';
import type { Policies } from '../../policies/policies.ts';
import { policyPage } from '../../policies/policy-page.ts';
import { nextPageHeaders, NextPageHeaders, pageRequest, PagingQueryFields } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

export const PolicyParams = z.object({ policy_id: PathIdSchema });
export const PolicyListQuery = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  status: PolicyStatusInputSchema.optional(),
  enabled: z.enum(['true', 'false']).optional(),
});

/** Spec 4.4 (`ruleType`) and the gRPC binding (`rule_type`). */
const ListQuery = PolicyListQuery.extend({
  rule_type: RuleTypeInputSchema.optional(),
  ruleType: RuleTypeInputSchema.optional(),
  ...PagingQueryFields,
});

/** The status a list asks for: `status`, else `enabled` (true ACTIVE, false DISABLED). */
export function listedStatus(query: z.output<typeof PolicyListQuery>): PolicyStatus | undefined {
  return query.status ?? (query.enabled === undefined ? undefined : query.enabled === 'true' ? 'ACTIVE' : 'DISABLED');
}

/** The result, with the pending approval a REQUIRE_APPROVAL decision opened (extension). */
export const EvaluationAnswerSchema = RestPolicyEvaluationResultSchema.extend({ approval_id: z.uuid().optional() });

export function evaluationAnswer(decision: PolicyDecision): z.infer<typeof EvaluationAnswerSchema> {
  return {
    ...toRestEvaluationResult(decision.result),
    ...(decision.approvalId !== null ? { approval_id: decision.approvalId } : {}),
  };
}

export function policyRoutes(routes: RouteTable, policies: Policies): void {
  routes.add({
    method: 'POST',
    path: '/v1/policies',
    operationId: 'createPolicy',
    tag: 'policies',
    access: 'policies:write',
    summary: 'Create a policy; conditions are compiled now, so a bad one is refused here',
    body: RestCreatePolicyRequestSchema,
    responses: {
      201: { description: 'created', schema: RestPolicySchema },
      400: {
        description: 'invalid request (SVC-SYS-9002) or uncompilable rule (SVC-POL-2003), naming the field',
        schema: ErrorBodySchema,
      },
    },
    handler: async ({ caller, body }) => ({ status: 201, body: toRestPolicy(await policies.create(caller, body)) }),
  });
  routes.add({
    method: 'GET',
    path: '/v1/policies',
    operationId: 'listPolicies',
    tag: 'policies',
    access: 'policies:read',
    summary: "The tenant's policies, highest priority first, a page at a time (next page token in X-Next-Page-Token)",
    query: ListQuery,
    responses: {
      200: { description: 'a page of policies', schema: z.array(RestPolicySchema), headers: NextPageHeaders },
    },
    handler: async ({ caller, query }) => {
      const listed = await policies.list(caller.tenant, { status: listedStatus(query) });
      const page = policyPage(withRuleType(listed, query.rule_type ?? query.ruleType), pageRequest(query));
      return { status: 200, body: page.items.map(toRestPolicy), headers: nextPageHeaders(page.nextPageToken) };
    },
  });
  routes.add({
    method: 'POST',
    path: '/v1/policies/evaluate',
    operationId: 'evaluatePolicies',
    tag: 'policies',
    access: 'policies:read',
    summary: "Evaluate an action against the tenant's policies",
    body: RestPolicyEvaluationRequestSchema,
    responses: { 200: { description: 'evaluation result', schema: EvaluationAnswerSchema } },
    handler: async ({ caller, body }) => {
      const decision = await policies.decide(caller, {
        action: body.action,
        context: body.context,
        policySet: body.policy_set,
        envelopeId: body.envelope_id,
      });
      return { status: 200, body: evaluationAnswer(decision) };
    },
  });
  routes.add({
    method: 'GET',
    path: '/v1/policies/{policy_id}',
    operationId: 'getPolicy',
    tag: 'policies',
    access: 'policies:read',
    summary: 'Read a policy',
    params: PolicyParams,
    responses: {
      200: { description: 'the policy', schema: RestPolicySchema },
      404: { description: 'policy not found (SVC-POL-2002)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, params }) => ({
      status: 200,
      body: toRestPolicy(await policies.get(caller.tenant, params.policy_id)),
    }),
  });
}
