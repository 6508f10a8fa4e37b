import {
  evaluateSemantic,
  SemanticJudgeRequestSchema,
  SemanticJudgeResponseSchema,
} from '../../../core/brain/index.ts';
import type { SemanticJudge } from '../../../core/policy/index.ts';
import type { RouteTable } from '../route.ts';

/** The brain's REST surface (spec 4.4): the Semantic Judge on its own, outside any policy. */
export function brainRoutes(routes: RouteTable, judge: SemanticJudge): void {
  routes.add({
    method: 'POST',
    path: '/v1/brain/semantic-judge/evaluate',
    operationId: 'evaluateSemanticJudge',
    tag: 'brain',
    access: 'policies:read',
    summary: 'Ask the Semantic Judge whether an action (text, tool name and arguments) shows an intent',
    body: SemanticJudgeRequestSchema,
    responses: { 200: { description: 'the verdict, with the evidence', schema: SemanticJudgeResponseSchema } },
    handler: async ({ body }) => ({ status: 200, body: await evaluateSemantic(judge, body) }),
  });
}
