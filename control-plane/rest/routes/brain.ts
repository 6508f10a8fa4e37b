import {
  evaluateSemantic,
  PredictCostRequestSchema,
  PredictCostResponseSchema,
  PredictOverrunRequestSchema,
  PredictOverrunResponseSchema,
  predictWorkload,
  SemanticJudgeRequestSchema,
  SemanticJudgeResponseSchema,
  type JudgeSelector,
} from '../../../core/brain/index.ts';
import type { CostPredictor } from '../../brain/cost-prediction.ts';
import type { Oracle } from '../../brain/oracle.ts';
import type { RouteTable } from '../route.ts';

/** The brain's REST surface (spec 4.4): the Semantic Judge on its own, outside any policy. */
export function brainRoutes(
  routes: RouteTable,
  deps: { judges: JudgeSelector; oracle: Oracle; costs: CostPredictor; clock: () => Date },
): void {
  const { judges, oracle, costs, clock } = deps;
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
    handler: async ({ caller, body }) => ({
      status: 200,
      // The schema admits exactly one of the two.
      body:
        body.workload !== undefined
          ? predictWorkload(body.workload, clock)
          : body.envelope_id !== undefined
            ? await oracle.predictEnvelope(caller.tenant, body.envelope_id)
            : await oracle.predictBudget(caller.tenant, body.budget_id as string),
    }),
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
}
