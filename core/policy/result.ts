import { z } from 'zod';
import { clipText } from '../domain/clip-text.ts';
import { MAX_NAME_LENGTH } from '../domain/bounds.ts';
import { DecisionSchema, EnforcementSchema } from './model.ts';
import { EvidenceSchema } from './semantic-judge.ts';

export const EffectSchema = z.enum(['allow', 'deny', 'no_match']);
export type Effect = z.infer<typeof EffectSchema>;

export const PolicyWarningSchema = z.object({
  policy_id: z.string(),
  rule_id: z.string(),
  message: z.string(),
});
export type PolicyWarning = z.infer<typeof PolicyWarningSchema>;

/** What an AUDIT (shadow-mode) policy would have decided, had it been enforced. */
export const ShadowDecisionSchema = z.object({
  policy_id: z.string(),
  rule_id: z.string(),
  decision: DecisionSchema,
});
export type ShadowDecision = z.infer<typeof ShadowDecisionSchema>;

/** What the Semantic Judge found in the action of the deciding rule's SEMANTIC conditions. */
export const SemanticFindingSchema = z.object({
  judge: z.string(),
  judge_version: z.string(),
  category: z.string().nullable(),
  confidence: z.number().min(0).max(1),
  evidence: z.array(EvidenceSchema),
});
export type SemanticFinding = z.infer<typeof SemanticFindingSchema>;

/** Evidence items, and characters of an excerpt, a finding keeps where it is recorded for good. */
export const KEPT_EVIDENCE_ITEMS = 20;
export const KEPT_EXCERPT_LENGTH = 1_000;

/**
 * A finding shortened to what an audit record keeps: its first KEPT_EVIDENCE_ITEMS evidence items,
 * names and excerpts clipped (`clipText`). A proxy reports the finding that refused its call; the
 * denial is kept whatever its judge wrote, and one report cannot grow the audit chain by a megabyte.
 */
export function keptFinding(finding: SemanticFinding): SemanticFinding {
  const name = (text: string) => clipText(text, MAX_NAME_LENGTH);
  return {
    judge: name(finding.judge),
    judge_version: name(finding.judge_version),
    category: finding.category === null ? null : name(finding.category),
    confidence: finding.confidence,
    evidence: finding.evidence.slice(0, KEPT_EVIDENCE_ITEMS).map((e) => ({
      field: name(e.field),
      start: e.start,
      end: e.end,
      signal: name(e.signal),
      excerpt: clipText(e.excerpt, KEPT_EXCERPT_LENGTH),
    })),
  };
}

export const EvaluationResultSchema = z.object({
  decision: DecisionSchema,
  allowed: z.boolean(),
  effect: EffectSchema,
  /** policy_id of the deciding policy (or of the first warning when only warnings matched). */
  matched_policy: z.string().nullable(),
  matched_policy_name: z.string().nullable(),
  /** rule_id of the deciding rule. */
  matched_rule: z.string().nullable(),
  /** The action pattern of that rule, case-folded (`network:*`): what it was written for. */
  matched_action: z.string().nullable(),
  /** Enforcement of the deciding policy; TERMINATE tells the caller to end the envelope. */
  enforcement: EnforcementSchema.nullable(),
  reason: z.string(),
  message: z.string().optional(),
  warnings: z.array(PolicyWarningSchema),
  shadow: z.array(ShadowDecisionSchema),
  /** Present when the deciding (or first warning) rule had SEMANTIC conditions the judge found violated. */
  semantic: SemanticFindingSchema.optional(),
  /** Present when the deciding (or first warning) rule matched a `sequence` condition: the category it names. */
  sequence: z.object({ category: z.string() }).optional(),
  evaluation_time_ms: z.number().nonnegative(),
});
export type EvaluationResult = z.infer<typeof EvaluationResultSchema>;
