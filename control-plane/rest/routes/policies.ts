import { z } from 'zod';
import { PathIdSchema, TenantIdSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import {
  PolicyStatusInputSchema,
  RestCreatePolicyRequestSchema,
  RestPolicyEvaluationRequestSchema,
  RestPolicyEvaluationResultSchema,
  RestPolicySchema,
  toRestEvaluationResult,
  toRestPolicy,
} from '../../../core/policy/index.ts';
import type { Policies } from '../../policies/policies.ts';
import type { RouteTable } from '../route.ts';

const PolicyParams = z.object({ policy_id: PathIdSchema });
const ListQuery = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  status: PolicyStatusInputSchema.optional(),
  enabled: z.enum(['true', 'false']).optional(),
});

/** The result, with the pending approval a REQUIRE_APPROVAL decision opened (extension). */
const EvaluationAnswerSchema = RestPolicyEvaluationResultSchema.extend({ approval_id: z.uuid().optional() });

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
    summary: "List the tenant's policies, highest priority first",
    query: ListQuery,
    responses: { 200: { description: 'policies', schema: z.array(RestPolicySchema) } },
    handler: async ({ caller, query }) => {
      const status =
        query.status ?? (query.enabled === undefined ? undefined : query.enabled === 'true' ? 'ACTIVE' : 'DISABLED');
      return { status: 200, body: (await policies.list(caller.tenant, { status })).map(toRestPolicy) };
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
      return {
        status: 200,
        body: {
          ...toRestEvaluationResult(decision.result),
          ...(decision.approvalId !== null ? { approval_id: decision.approvalId } : {}),
        },
      };
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
