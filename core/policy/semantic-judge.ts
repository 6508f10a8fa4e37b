import { z } from 'zod';

/** The built-in categories every judge understands (spec 1: categories seen). */
export const INTENT_CATEGORIES = ['DESTRUCTIVE', 'DATA_EXFILTRATION', 'SUSPICIOUS'] as const;
export type IntentCategory = (typeof INTENT_CATEGORIES)[number];

export const MAX_CATEGORY_EXAMPLES = 50;
export const MAX_EXAMPLE_CHARS = 2000;

const example = z.string().trim().min(1).max(MAX_EXAMPLE_CHARS);

/**
 * A category a tenant defines in a SEMANTIC condition's value: its name (the intent), what it
 * means, and labelled examples of actions that show it and near-misses that do not.
 */
/** Longest name of a tenant's own category (a SEMANTIC condition's, or an inline one's intent). */
export const MAX_CATEGORY_NAME_CHARS = 100;

export const SemanticCategorySchema = z.strictObject({
  name: z.string().trim().min(1).max(MAX_CATEGORY_NAME_CHARS),
  description: z.string().max(MAX_EXAMPLE_CHARS).default(''),
  examples: z.array(example).min(1).max(MAX_CATEGORY_EXAMPLES),
  counter_examples: z.array(example).max(MAX_CATEGORY_EXAMPLES).default([]),
});
export type SemanticCategory = z.infer<typeof SemanticCategorySchema>;

export const JudgeInputSchema = z.object({
  /** The text under judgement: the context value at the condition's field. */
  text: z.string(),
  /** The intent the condition names: a category (DESTRUCTIVE) or a description. */
  intent: z.string(),
  /** The condition's field, so evidence can name where it was found (`tool_args`, `input_text`). */
  field: z.string().default('text'),
  /** A tenant-defined category's definition, when the condition carries one. */
  category: SemanticCategorySchema.optional(),
  /** The whole evaluation context: a judge may look beyond the condition's field (`tool_name`, `tool_args`). */
  context: z.record(z.string(), z.unknown()),
  /**
   * The condition's choice of what a failed judgement means: a judge that can fail (the LLM
   * judge) answers "not violated" for `open` and fails for `closed`; its own mode when absent.
   */
  failMode: z.enum(['closed', 'open']).optional(),
});
/** A category arrives compiled (its defaults applied), so a judge can cache by its identity. */
export type JudgeInput = Omit<z.input<typeof JudgeInputSchema>, 'category'> & { category?: SemanticCategory };

/** Where a judge saw its category: a field (`tool_args.command`) and a character span of its text. */
export const EvidenceSchema = z.object({
  field: z.string(),
  start: z.int().nonnegative(),
  end: z.int().nonnegative(),
  /** The signal that matched, a stable name such as `shell.rm_recursive` or `sql.drop`. */
  signal: z.string(),
  /** The matched text, shortened; credentials are masked. */
  excerpt: z.string(),
});
export type Evidence = z.infer<typeof EvidenceSchema>;

export const JudgeVerdictSchema = z.object({
  /** Something in the input shows the intent (the engine still applies the condition's min_confidence). */
  violated: z.boolean(),
  category: z.string().optional(),
  /** How sure the judge is that the input shows the category: 0 when nothing points to it. */
  confidence: z.number().min(0).max(1),
  evidence: z.array(EvidenceSchema).default([]),
  /** Part of the input lay beyond what the judge reads; the engine resolves that fail-closed. */
  truncated: z.boolean().default(false),
});
export type JudgeVerdict = z.output<typeof JudgeVerdictSchema>;
export type JudgeVerdictInput = z.input<typeof JudgeVerdictSchema>;

/**
 * Answers SEMANTIC conditions: does the input show the intent the condition names? An LLM
 * judge implements this one method; the engine bounds it with a timeout and fails closed.
 */
export interface SemanticJudge {
  /** `builtin`, or the name of a plugged-in judge; recorded with every decision it makes. */
  readonly name: string;
  readonly version: string;
  judge(input: JudgeInput): Promise<JudgeVerdictInput>;
}

/** A judge that answers in process without waiting: the proxy's hot path uses only these. */
export interface SyncSemanticJudge extends SemanticJudge {
  judgeNow(input: JudgeInput): JudgeVerdict;
}
