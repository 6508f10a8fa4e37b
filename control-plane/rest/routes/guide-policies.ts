import { z } from 'zod';
import { IdSchema, MAX_TEXT_LENGTH, MetadataSchema, NameSchema, TenantIdSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema, isSvcError } from '../../../core/errors/index.ts';
import {
  GuideCreatePolicyRequestSchema,
  GuideImportRequestSchema,
  GuidePolicySchema,
  GuidePolicyTypeSchema,
  GuideUpdatePolicyRequestSchema,
  guideCreateRequest,
  guidePolicyChanges,
  faultsByRuleId,
  toGuidePolicy,
} from '../../../core/policy/index.ts';
import type { Policies } from '../../policies/policies.ts';
import { policyPage } from '../../policies/policy-page.ts';
import { pageRequest, PagingQueryFields } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';
import { evaluationAnswer, EvaluationAnswerSchema, listedStatus, PolicyListQuery, PolicyParams } from './policies.ts';

const ListQuery = PolicyListQuery.extend({
  policy_type: GuidePolicyTypeSchema.optional(),
  policyType: GuidePolicyTypeSchema.optional(),
  ...PagingQueryFields,
});
const PolicyPageSchema = z.object({ policies: z.array(GuidePolicySchema), next_page_token: z.string().nullable() });
const ImportedSchema = z.object({ imported: z.int(), policies: z.array(GuidePolicySchema) });
const DeletedSchema = z.object({ policy_id: z.string(), deleted: z.literal(true) });

const EvaluateRequestSchema = z
  .strictObject({
    tenant_id: TenantIdSchema.optional(),
    action: NameSchema,
    /** The text of the request, for content and SEMANTIC conditions (context field `input_text`). */
    input_text: z
      .string()
      .max(MAX_TEXT_LENGTH * 25)
      .optional(),
    /** Context field `workflow_id`; a pending approval carries it. */
    workflow_id: IdSchema.optional(),
    /** The trace (envelope) the evaluation belongs to: it is listed under the trace's evaluations. */
    trace_id: z.uuid().optional(),
    envelope_id: z.uuid().optional(),
    /** Further context fields (tool_name, model_id, ...). */
    context: MetadataSchema.default({}),
  })
  .refine((r) => r.trace_id === undefined || r.envelope_id === undefined || r.trace_id === r.envelope_id, {
    path: ['trace_id'],
    message: 'trace_id and envelope_id name different traces',
  });

/** Runs a policy write, naming a faulty rule by its id as the `rules` object has it. */
async function namingRuleIds<T>(
  run: () => Promise<T>,
  ruleIdsOf: (policyIndex: number | null) => readonly string[] | undefined,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw isSvcError(error) ? faultsByRuleId(error, ruleIdsOf) : error;
  }
}

const NOT_FOUND = { description: 'policy not found (SVC-POL-2002)', schema: ErrorBodySchema };
const UNCOMPILABLE = {
  description: 'invalid request (SVC-SYS-9002) or uncompilable rule (SVC-POL-2003), naming the field',
  schema: ErrorBodySchema,
};

/**
 * The guides' policy paths (spec 4.4) over the policy service `/v1/policies` uses: the same
 * policies in the guides' shape (docs/surfaces.md, "Guide policy fields").
 */
export function guidePolicyRoutes(routes: RouteTable, policies: Policies): void {
  routes.add({
    method: 'GET',
    path: '/api/v1/policies',
    operationId: 'guideListPolicies',
    tag: 'guide',
    access: 'policies:read',
    summary: "The tenant's policies, highest priority first, a page at a time",
    query: ListQuery,
    responses: { 200: { description: 'a page of policies', schema: PolicyPageSchema } },
    handler: async ({ caller, query }) => {
      const type = query.policy_type ?? query.policyType;
      const listed = (await policies.list(caller.tenant, { status: listedStatus(query) }))
        .map(toGuidePolicy)
        .filter((p) => type === undefined || p.policy_type === type);
      const page = policyPage(listed, pageRequest(query));
      return { status: 200, body: { policies: page.items, next_page_token: page.nextPageToken } };
    },
  });
  routes.add({
    method: 'POST',
    path: '/api/v1/policies',
    operationId: 'guideCreatePolicy',
    tag: 'guide',
    access: 'policies:write',
    summary: 'Create a policy (enabled unless told otherwise); its rules are compiled now',
    body: GuideCreatePolicyRequestSchema,
    responses: { 201: { description: 'created', schema: GuidePolicySchema }, 400: UNCOMPILABLE },
    handler: async ({ caller, body }) => {
      const policy = await namingRuleIds(
        () => policies.create(caller, guideCreateRequest(body)),
        () => Object.keys(body.rules),
      );
      return { status: 201, body: toGuidePolicy(policy) };
    },
  });
  routes.add({
    method: 'POST',
    path: '/api/v1/policies/import',
    operationId: 'guideImportPolicies',
    tag: 'guide',
    access: 'policies:write',
    summary: 'Create every policy of the array or none; a fault names the index and the field',
    body: GuideImportRequestSchema,
    responses: { 201: { description: 'all created, in the order given', schema: ImportedSchema }, 400: UNCOMPILABLE },
    handler: async ({ caller, body }) => {
      const created = await namingRuleIds(
        () => policies.import(caller, body.map(guideCreateRequest)),
        (index) => (index === null ? undefined : Object.keys(body[index]?.rules ?? {})),
      );
      return { status: 201, body: { imported: created.length, policies: created.map(toGuidePolicy) } };
    },
  });
  routes.add({
    method: 'GET',
    path: '/api/v1/policies/{policy_id}',
    operationId: 'guideGetPolicy',
    tag: 'guide',
    access: 'policies:read',
    summary: 'Read a policy',
    params: PolicyParams,
    responses: { 200: { description: 'the policy', schema: GuidePolicySchema }, 404: NOT_FOUND },
    handler: async ({ caller, params }) => ({
      status: 200,
      body: toGuidePolicy(await policies.get(caller.tenant, params.policy_id)),
    }),
  });
  routes.add({
    method: 'PATCH',
    path: '/api/v1/policies/{policy_id}',
    operationId: 'guideUpdatePolicy',
    tag: 'guide',
    access: 'policies:write',
    summary: 'Change the fields given; the others stay',
    params: PolicyParams,
    body: GuideUpdatePolicyRequestSchema,
    responses: {
      200: { description: 'the policy after', schema: GuidePolicySchema },
      400: UNCOMPILABLE,
      404: NOT_FOUND,
    },
    handler: async ({ caller, params, body }) => {
      // Only a type change needs the policy's other tags, to lay the type over them.
      const current = body.policy_type === undefined ? undefined : await policies.get(caller.tenant, params.policy_id);
      const changes = guidePolicyChanges(current?.tags ?? {}, body);
      const updated = await namingRuleIds(
        () => policies.update(caller, params.policy_id, changes),
        () => (body.rules === undefined ? undefined : Object.keys(body.rules)),
      );
      return { status: 200, body: toGuidePolicy(updated) };
    },
  });
  routes.add({
    method: 'DELETE',
    path: '/api/v1/policies/{policy_id}',
    operationId: 'guideDeletePolicy',
    tag: 'guide',
    access: 'policies:write',
    summary: 'Delete a policy; proxies drop it with the next ruleset',
    params: PolicyParams,
    responses: { 200: { description: 'deleted', schema: DeletedSchema }, 404: NOT_FOUND },
    handler: async ({ caller, params }) => {
      await policies.remove(caller, params.policy_id);
      return { status: 200, body: { policy_id: params.policy_id, deleted: true } };
    },
  });
  routes.add({
    method: 'POST',
    path: '/api/v1/evaluate',
    operationId: 'guideEvaluate',
    tag: 'guide',
    access: 'policies:read',
    summary: "Evaluate an action with its input text against the tenant's policies, as /v1/policies/evaluate does",
    body: EvaluateRequestSchema,
    responses: { 200: { description: 'evaluation result', schema: EvaluationAnswerSchema } },
    handler: async ({ caller, body }) => {
      const context: Record<string, unknown> = { ...body.context };
      if (body.input_text !== undefined) context.input_text = body.input_text;
      if (body.workflow_id !== undefined) context.workflow_id = body.workflow_id;
      const decision = await policies.decide(caller, {
        action: body.action,
        context,
        envelopeId: body.trace_id ?? body.envelope_id,
      });
      return { status: 200, body: evaluationAnswer(decision) };
    },
  });
}
