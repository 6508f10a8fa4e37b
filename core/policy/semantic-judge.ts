import { z } from 'zod';

export const JudgeInputSchema = z.object({
  /** The text under judgement: the context value at the condition's field. */
  text: z.string(),
  /** The intent the condition names: a category (DESTRUCTIVE) or a description. */
  intent: z.string(),
  context: z.record(z.string(), z.unknown()),
});
export type JudgeInput = z.infer<typeof JudgeInputSchema>;

export const JudgeVerdictSchema = z.object({
  violated: z.boolean(),
  category: z.string().optional(),
  confidence: z.number().min(0).max(1),
});
export type JudgeVerdict = z.infer<typeof JudgeVerdictSchema>;

/** Answers SEMANTIC conditions: does the text show the intent the condition names? */
export interface SemanticJudge {
  judge(input: JudgeInput): Promise<JudgeVerdict>;
}
