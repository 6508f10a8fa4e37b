import { z } from 'zod';
import {
  evaluateSemantic,
  ImmuneDetectionSchema,
  PredictCostRequestSchema,
  PredictCostResponseSchema,
  PredictOverrunRequestSchema,
  PredictOverrunResponseSchema,
  SemanticJudgeRequestSchema,
  SemanticJudgeResponseSchema,
  type JudgeSelector,
} from '../../../core/brain/index.ts';
import { MAX_NAME_LENGTH } from '../../../core/domain/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import type { CostPredictor } from '../../brain/cost-prediction.ts';
import { DetectionQuerySchema, type Detections } from '../../brain/detections.ts';
import type { Oracle } from '../../brain/oracle.ts';
import { pageRequest, PagingQueryFields } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

const name = z.string().max(MAX_NAME_LENGTH).optional();
/** An ISO-8601 date-time is far shorter; the bound keeps every query within the header limit. */
const time = z.string().max(64).optional();
/** The detections listing's query: snake_case and the gateway's camelCase names alike. */
const DetectionsQuery = z.object({
  envelope_id: name,
  envelopeId: name,
  execution_id: name,
  executionId: name,
  kind: name,
  since: time,
  until: time,
  ...PagingQueryFields,
});

/** The brain's REST surface (spec 4.4): the Semantic Judge on its own, the Oracle, the Immune System's detections. */
export function brainRoutes(
  routes: RouteTable,
  deps: { judges: JudgeSelector; oracle: Oracle; costs: CostPredictor; detections: Detections },
): void {
  const { judges, oracle, costs, detections } = deps;
  routes.add({
    method: 'POST',
    path: '/v1/brain/semantic-judge/evaluate',
    operationId: 'evaluateSemanticJudge',
    tag: 'brain',
    access: 'policies:read',
    summary: "Ask the tenant's Semantic Judge whether an action (text, tool name and arguments) shows an intent",
    body: SemanticJudgeRequestSchema,
    responses: { 200: { description: 'the verdict, with the evidence', schema: SemanticJudgeResponseSchema } },
    handler: async ({ caller, body }) => ({
      status: 200,
      body: await evaluateSemantic(judges.forTenant(caller.tenant), body),
    }),
  });
  routes.add({
    method: 'POST',
    path: '/v1/brain/oracle/predict-overrun',
    operationId: 'predictOverrun',
    tag: 'brain',
    access: 'budgets:read',
    summary:
      'The probability that a budget or an envelope (from its spend and recorded history), or a workload given inline, runs over before its period ends',
    body: PredictOverrunRequestSchema,
    responses: { 200: { description: 'the prediction', schema: PredictOverrunResponseSchema } },
    handler: async ({ caller, body }) => ({ status: 200, body: await oracle.answer(caller.tenant, body) }),
  });
  routes.add({
    method: 'POST',
    path: '/v1/costs/predict',
    operationId: 'predictCost',
    tag: 'brain',
    access: 'budgets:read',
    summary: 'What a prospective call will cost: input tokens counted, output length from recorded calls',
    body: PredictCostRequestSchema,
    responses: { 200: { description: 'the prediction', schema: PredictCostResponseSchema } },
    handler: async ({ caller, body }) => ({ status: 200, body: await costs.predict(caller.tenant, body) }),
  });
  routes.add({
    method: 'GET',
    path: '/v1/brain/immune-system/detections',
    operationId: 'listDetections',
    tag: 'brain',
    access: 'events:read',
    summary:
      "The Immune System's detections (sequences matched, call-rate and spend anomalies), newest first, by envelope, execution, kind and time",
    query: DetectionsQuery,
    responses: {
      200: {
        description: 'a page of detections',
        schema: z.object({ detections: z.array(ImmuneDetectionSchema), next_page_token: z.string() }),
      },
    },
    handler: async ({ caller, query }) => {
      const q = parseOrThrow(DetectionQuerySchema, {
        envelope_id: query.envelope_id ?? query.envelopeId,
        execution_id: query.execution_id ?? query.executionId,
        kind: query.kind,
        since: query.since,
        until: query.until,
      });
      return { status: 200, body: await detections.list(caller.tenant, q, pageRequest(query)) };
    },
  });
}
