import { z } from 'zod';
import { JsonValueSchema, MetadataSchema } from '../domain/common.ts';
import { TenantIdSchema } from '../domain/bounds.ts';
import {
  EvidenceSchema,
  MAX_CATEGORY_EXAMPLES,
  MAX_CATEGORY_NAME_CHARS,
  MAX_EXAMPLE_CHARS,
  SemanticCategorySchema,
  type SemanticJudge,
} from '../policy/semantic-judge.ts';

const example = z.string().trim().min(1).max(MAX_EXAMPLE_CHARS);

/** POST /v1/brain/semantic-judge/evaluate: does this action show this intent? */
export const SemanticJudgeRequestSchema = z
  .strictObject({
    tenant_id: TenantIdSchema.optional(),
    /** The text under judgement (a prompt, a command, a tool's output). */
    text: z.string(),
    /** A category (DESTRUCTIVE, DATA_EXFILTRATION, SUSPICIOUS, or a tenant's own with `examples`) or a description. */
    intent: z.string().trim().min(1).max(200),
    tool_name: z.string().max(256).optional(),
    /** The arguments as the model or MCP client sent them: JSON text, or the object. */
    tool_args: z.union([z.string(), MetadataSchema, z.array(JsonValueSchema)]).optional(),
    context: MetadataSchema.default({}),
    /** `violated` is true only at or above this confidence (the default of SEMANTIC conditions). */
    min_confidence: z.number().min(0).max(1).default(0.5),
    /** A tenant category defined inline, as in a SEMANTIC condition's value. */
    description: z.string().max(MAX_EXAMPLE_CHARS).optional(),
    examples: z.array(example).min(1).max(MAX_CATEGORY_EXAMPLES).optional(),
    counter_examples: z.array(example).max(MAX_CATEGORY_EXAMPLES).optional(),
  })
  .refine((r) => r.examples === undefined || r.intent.length <= MAX_CATEGORY_NAME_CHARS, {
    path: ['intent'],
    message: `names the category defined inline by examples: at most ${MAX_CATEGORY_NAME_CHARS} characters`,
  });
export type SemanticJudgeRequest = z.infer<typeof SemanticJudgeRequestSchema>;

export const SemanticJudgeResponseSchema = z.object({
  violated: z.boolean(),
  category: z.string().nullable(),
  confidence: z.number().min(0).max(1),
  evidence: z.array(EvidenceSchema),
  /** Part of the input lay beyond the judge's limit (`semantic_judge_max_text_chars`) and was not read. */
  truncated: z.boolean(),
  judge: z.string(),
  judge_version: z.string(),
  evaluation_time_ms: z.number().nonnegative(),
});
export type SemanticJudgeResponse = z.infer<typeof SemanticJudgeResponseSchema>;

/** Judges one request: what the REST route (and later the gRPC SemanticJudgeService) answers. */
export async function evaluateSemantic(
  judge: SemanticJudge,
  request: SemanticJudgeRequest,
): Promise<SemanticJudgeResponse> {
  const started = performance.now();
  const context: Record<string, unknown> = { ...request.context };
  if (request.tool_name !== undefined) context.tool_name = request.tool_name;
  if (request.tool_args !== undefined)
    context.tool_args = typeof request.tool_args === 'string' ? request.tool_args : JSON.stringify(request.tool_args);
  const category =
    request.examples === undefined
      ? undefined
      : SemanticCategorySchema.parse({
          name: request.intent,
          description: request.description ?? '',
          examples: request.examples,
          counter_examples: request.counter_examples ?? [],
        });
  const verdict = await judge.judge({
    text: request.text,
    intent: request.intent,
    field: 'text',
    context,
    ...(category === undefined ? {} : { category }),
  });
  const confidence = verdict.confidence;
  return {
    violated: verdict.violated && confidence >= request.min_confidence,
    category: verdict.category ?? null,
    confidence,
    evidence: verdict.evidence ?? [],
    truncated: verdict.truncated ?? false,
    judge: judge.name,
    judge_version: judge.version,
    evaluation_time_ms: performance.now() - started,
  };
}
