import { z } from 'zod';
import {
  ActorSchema,
  PathIdSchema,
  TenantIdSchema,
  toTrace,
  TraceSchema,
  TraceStateSchema,
} from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import { DecisionSchema } from '../../../core/policy/index.ts';
import { MAX_PAGE_SIZE } from '../../storage/storage.ts';
import type { Traces } from '../../traces/traces.ts';
import { pageRequest, PagingQueryFields } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';
import { StoredEventSchema, toRestEvent } from './events.ts';

const TraceParams = z.object({ trace_id: PathIdSchema });
const ListQuery = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  status: TraceStateSchema.optional(),
  /** The guides' name for `page_size`. */
  limit: z.coerce.number().int().min(1).max(MAX_PAGE_SIZE).optional(),
  ...PagingQueryFields,
});
const PagingOnly = z.object({ ...PagingQueryFields });

const truncated = z.boolean().meta({ description: 'more records were there than one answer reads' });
const TracePageSchema = z.object({
  traces: z.array(TraceSchema),
  next_page_token: z.string().nullable(),
});
const TraceDetailSchema = TraceSchema.extend({
  events: z.array(StoredEventSchema),
  events_truncated: z.boolean(),
});
const EvaluationSchema = z.object({
  evaluation_id: z.string(),
  evaluated_at: z.string(),
  action: z.string(),
  decision: DecisionSchema,
  matched_policy: z.string().nullable(),
  matched_rule: z.string().nullable(),
  shadow: z.array(z.object({ policy_id: z.string(), rule_id: z.string(), decision: DecisionSchema })),
  approval_id: z.string().nullable(),
  actor: ActorSchema,
});
const EvaluationPageSchema = z.object({
  evaluations: z.array(EvaluationSchema),
  next_page_token: z.string().nullable(),
  truncated,
});
const NOT_FOUND = { description: 'no such trace (SVC-ENV-1001)', schema: ErrorBodySchema };

/** The guides' trace paths (spec 4.4): a trace is an envelope, its id the envelope id. */
export function guideTraceRoutes(routes: RouteTable, traces: Traces): void {
  routes.add({
    method: 'GET',
    path: '/api/v1/traces',
    operationId: 'guideListTraces',
    tag: 'guide',
    access: 'envelopes:read',
    summary: "The tenant's traces, newest first, a page at a time (`limit` is `page_size`)",
    query: ListQuery,
    responses: { 200: { description: 'a page of traces', schema: TracePageSchema } },
    handler: async ({ caller, query }) => {
      const page = pageRequest(query);
      const listed = await traces.list(caller.tenant, {
        state: query.status,
        page: { ...page, pageSize: page.pageSize ?? query.limit },
      });
      return {
        status: 200,
        body: { traces: listed.items.map(toTrace), next_page_token: listed.nextPageToken },
      };
    },
  });
  routes.add({
    method: 'GET',
    path: '/api/v1/traces/{trace_id}',
    operationId: 'guideGetTrace',
    tag: 'guide',
    access: 'envelopes:read',
    summary: 'A trace with its newest 100 events, oldest first',
    params: TraceParams,
    responses: { 200: { description: 'the trace', schema: TraceDetailSchema }, 404: NOT_FOUND },
    handler: async ({ caller, params }) => {
      const { envelope, events, eventsTruncated } = await traces.get(caller.tenant, params.trace_id);
      return {
        status: 200,
        body: {
          ...toTrace(envelope),
          events: events.map(toRestEvent),
          events_truncated: eventsTruncated,
        },
      };
    },
  });
  routes.add({
    method: 'GET',
    path: '/api/v1/traces/{trace_id}/evaluations',
    operationId: 'guideTraceEvaluations',
    tag: 'guide',
    access: 'policies:read',
    summary: 'The policy evaluations recorded against a trace, oldest first',
    params: TraceParams,
    query: PagingOnly,
    responses: { 200: { description: 'a page of evaluations', schema: EvaluationPageSchema }, 404: NOT_FOUND },
    handler: async ({ caller, params, query }) => {
      const page = await traces.evaluations(caller.tenant, params.trace_id, pageRequest(query));
      return {
        status: 200,
        body: {
          evaluations: page.items.map(({ envelope_id: _trace, ...evaluation }) => evaluation),
          next_page_token: page.nextPageToken,
          truncated: page.truncated,
        },
      };
    },
  });
}
