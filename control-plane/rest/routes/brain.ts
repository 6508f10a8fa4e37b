import {
  evaluateSemantic,
  SemanticJudgeRequestSchema,
  SemanticJudgeResponseSchema,
  type JudgeSelector,
} from '../../../core/brain/index.ts';
import type { RouteTable } from '../route.ts';

/** The brain's REST surface (spec 4.4): the Semantic Judge on its own, outside any policy. */
export function brainRoutes(routes: RouteTable, judges: JudgeSelector): void {
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
}
