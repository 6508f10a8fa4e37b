import { z } from 'zod';
import {
  CreateEnvelopeRequestSchema,
  EnvelopeStatusSchema,
  EventRecordSchema,
  IdSchema,
  PathIdSchema,
  RestEnvelopeSchema,
  TenantIdSchema,
  TerminateRequestSchema,
  toRestEnvelope,
  UpdateEnvelopeStatusRequestSchema,
} from '../../../core/domain/index.ts';
import { BudgetErrorBodySchema, ErrorBodySchema, PolicyViolationBodySchema } from '../../../core/errors/index.ts';
import type { Envelopes } from '../../envelopes/envelopes.ts';
import { LimitOrPagingQueryFields, nextPageHeaders, NextPageHeaders, pageOrLimit } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

const EnvelopeParams = z.object({ envelope_id: PathIdSchema });
const EventAcceptedSchema = z.object({
  accepted: z.literal(true),
  event_id: z.string(),
  duplicate: z.boolean(),
  envelope_id: z.string(),
  state: z.string(),
});
const ListQuery = z.object({
  status: EnvelopeStatusSchema.optional(),
  budget_id: IdSchema.optional(),
  budgetId: IdSchema.optional(),
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  ...LimitOrPagingQueryFields,
});

const notFound = { description: 'envelope not found (SVC-ENV-1001)', schema: ErrorBodySchema };
const invalid = { description: 'invalid request (SVC-SYS-9002), naming the field', schema: ErrorBodySchema };
const ended = {
  description: 'envelope already completed or terminated (SVC-ENV-1003, SVC-ENV-1004)',
  schema: ErrorBodySchema,
};

export function envelopeRoutes(routes: RouteTable, envelopes: Envelopes): void {
  routes.add({
    method: 'POST',
    path: '/v1/envelopes',
    operationId: 'createEnvelope',
    tag: 'envelopes',
    access: 'envelopes:write',
    summary: 'Open an execution envelope: policy check for execution:start, then budget validation',
    body: CreateEnvelopeRequestSchema,
    responses: {
      201: { description: 'envelope AUTHORIZED', schema: RestEnvelopeSchema },
      400: invalid,
      403: {
        description: 'a policy denies the execution (SVC-POL-2001) or requires approval (SVC-POL-2004)',
        schema: PolicyViolationBodySchema,
      },
      422: {
        description: 'budget exhausted, expired, full or invalid (SVC-BUD-3001, 3003, 3004, 3005)',
        schema: BudgetErrorBodySchema,
      },
      409: { description: 'execution_id already has an envelope (SVC-SYS-9008)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, body }) => ({ status: 201, body: toRestEnvelope(await envelopes.create(caller, body)) }),
  });
  routes.add({
    method: 'GET',
    path: '/v1/envelopes',
    operationId: 'listEnvelopes',
    tag: 'envelopes',
    access: 'envelopes:read',
    summary: "The tenant's envelopes, a page at a time (next page token in X-Next-Page-Token), or up to `limit`",
    query: ListQuery,
    responses: {
      200: { description: 'envelopes', schema: z.array(RestEnvelopeSchema), headers: NextPageHeaders },
    },
    handler: async ({ caller, query }) => {
      const filter = { status: query.status, budget_id: query.budget_id ?? query.budgetId };
      const page = await pageOrLimit(query, (p) => envelopes.list(caller.tenant, filter, p));
      return { status: 200, body: page.items.map(toRestEnvelope), headers: nextPageHeaders(page.nextPageToken) };
    },
  });
  routes.add({
    method: 'GET',
    path: '/v1/envelopes/{envelope_id}',
    operationId: 'getEnvelope',
    tag: 'envelopes',
    access: 'envelopes:read',
    summary: 'Read an envelope',
    params: EnvelopeParams,
    responses: { 200: { description: 'the envelope', schema: RestEnvelopeSchema }, 404: notFound },
    handler: async ({ caller, params }) => ({
      status: 200,
      body: toRestEnvelope(await envelopes.get(caller.tenant, params.envelope_id)),
    }),
  });
  routes.add({
    method: 'POST',
    path: '/v1/envelopes/{envelope_id}/events',
    operationId: 'recordEvent',
    tag: 'envelopes',
    access: 'envelopes:write',
    summary: "Record an event: updates the envelope's cost summary and the budget's usage",
    params: EnvelopeParams,
    body: EventRecordSchema,
    responses: {
      202: { description: 'event accepted', schema: EventAcceptedSchema },
      400: {
        description:
          'invalid request (SVC-SYS-9002), naming the field, or an event that would carry a running total past 2^53 - 1 (SVC-EVT-4002)',
        schema: ErrorBodySchema,
      },
      404: notFound,
      409: ended,
    },
    handler: async ({ caller, params, body }) => {
      const outcome = await envelopes.recordEvent(caller, params.envelope_id, body);
      return {
        status: 202,
        body: {
          accepted: true,
          event_id: outcome.event_id,
          duplicate: outcome.duplicate,
          envelope_id: params.envelope_id,
          state: toRestEnvelope(outcome.envelope).state,
        },
      };
    },
  });
  routes.add({
    method: 'POST',
    path: '/v1/envelopes/{envelope_id}/terminate',
    operationId: 'terminateEnvelope',
    tag: 'envelopes',
    access: 'envelopes:write',
    summary: 'Terminate an envelope',
    params: EnvelopeParams,
    body: TerminateRequestSchema,
    bodyOptional: true,
    responses: { 200: { description: 'terminated', schema: RestEnvelopeSchema }, 404: notFound, 409: ended },
    handler: async ({ caller, params, body }) => ({
      status: 200,
      body: toRestEnvelope(await envelopes.terminate(caller, params.envelope_id, body)),
    }),
  });
  routes.add({
    method: 'POST',
    path: '/v1/envelopes/{envelope_id}/status',
    operationId: 'updateEnvelopeStatus',
    tag: 'envelopes',
    access: 'envelopes:write',
    summary: 'Move an envelope to another status (the transitions of UpdateEnvelopeStatus)',
    params: EnvelopeParams,
    body: UpdateEnvelopeStatusRequestSchema,
    responses: {
      200: { description: 'updated', schema: RestEnvelopeSchema },
      400: invalid,
      404: notFound,
      409: {
        description: 'illegal transition (SVC-ENV-1002) or envelope already ended (SVC-ENV-1003, SVC-ENV-1004)',
        schema: ErrorBodySchema,
      },
    },
    handler: async ({ caller, params, body }) => ({
      status: 200,
      body: toRestEnvelope(await envelopes.updateStatus(caller, params.envelope_id, body)),
    }),
  });
}
