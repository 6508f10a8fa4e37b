import { z } from 'zod';
import { JsonValueSchema } from '../domain/common.ts';
import { compileActionPattern, type ActionMatcher } from './action-pattern.ts';
import type { CompiledCheck } from './condition.ts';

/**
 * Ordered matching of earlier actions: each step is found in a later action than the step before
 * it. Taking the earliest action that fits each step in turn finds the pattern whenever one
 * exists, in one pass. The tenant's `sequence` conditions and the built-in judge's sequence rules
 * both match through this.
 */
export function matchInOrder<T>(items: readonly T[], steps: readonly ((item: T) => boolean)[]): boolean {
  let step = 0;
  for (const item of items) {
    if (step === steps.length) break;
    if ((steps[step] as (item: T) => boolean)(item)) step++;
  }
  return step === steps.length;
}

/** The most steps a sequence condition may have, and the longest window it may look back. */
export const MAX_SEQUENCE_STEPS = 8;
export const MAX_SEQUENCE_WINDOW_SECONDS = 86_400;
/** The earlier actions a sequence condition reads, newest last (the histories keep fewer). */
export const MAX_SEQUENCE_ACTIONS = 64;

const StepConditionSchema = z.object({
  field: z.string().min(1),
  operator: z.string().min(1),
  value: JsonValueSchema,
});

const StepSchema = z.strictObject({
  /** Action pattern of the earlier action (`tool:read_file`, `tool:*`). */
  action: z.string().trim().min(1),
  /** Conditions on the earlier action's fields (`action`, `tool_name`, `tool_args`), all must match. */
  conditions: z.array(StepConditionSchema).max(16).default([]),
});

/** The value of a `sequence` condition, as written in a policy rule. */
export const SequenceValueSchema = z.strictObject({
  steps: z.array(StepSchema).min(1).max(MAX_SEQUENCE_STEPS),
  /** The whole pattern, first step to the action judged, within this many seconds. */
  within_seconds: z.number().positive().max(MAX_SEQUENCE_WINDOW_SECONDS),
  /** What the pattern shows, as detections and violations name it (`DATA_EXFILTRATION`). */
  category: z
    .string()
    .regex(/^[A-Z][A-Z0-9_]{0,63}$/, 'an upper-case name such as DATA_EXFILTRATION')
    .default('SUSPICIOUS'),
});
export type SequenceValue = z.infer<typeof SequenceValueSchema>;

/** An earlier action as a sequence reads it: its action, epoch milliseconds, and other fields. */
export type SequenceItem = Readonly<Record<string, unknown>> & { action: string; at: number };

/**
 * What a history needs of a sequence to keep its partial matches (core/brain/immune/action-history.ts):
 * a key that is the same for the same steps, whatever rule or ruleset version holds them, and
 * each step's test of an earlier action.
 */
export interface SequenceShape {
  readonly key: string;
  readonly steps: readonly ((item: SequenceItem) => boolean)[];
}

export interface CompiledSequence extends SequenceShape {
  readonly windowMs: number;
  readonly category: string;
}

function isItem(value: unknown): value is SequenceItem {
  if (value === null || typeof value !== 'object') return false;
  const { action, at } = value as Record<string, unknown>;
  return typeof action === 'string' && typeof at === 'number' && Number.isFinite(at);
}

function stepTest(matchesAction: ActionMatcher, checks: readonly CompiledCheck[]): (item: SequenceItem) => boolean {
  return (item) => {
    if (!matchesAction(item.action.toLowerCase())) return false;
    for (const check of checks) {
      const value = check.read(item);
      if (value === undefined || !check.test(value)) return false;
    }
    return true;
  };
}

/** Compiles the steps' patterns; their conditions are compiled by the caller (no semantic, no sequence). */
export function compileSteps(value: SequenceValue, checks: readonly (readonly CompiledCheck[])[]): CompiledSequence {
  return {
    key: `sequence:${JSON.stringify(value.steps)}`,
    steps: value.steps.map((step, i) => stepTest(compileActionPattern(step.action.toLowerCase()), checks[i] ?? [])),
    windowMs: value.within_seconds * 1000,
    category: value.category,
  };
}

/**
 * Whether the earlier actions (`[{action, at, ...fields}]`, oldest first) hold the steps in order,
 * every one of them within the window before `now`. Malformed entries are passed over.
 */
export function sequenceMatches(sequence: CompiledSequence, actual: unknown, now: number): boolean {
  if (!Array.isArray(actual)) return false;
  const since = now - sequence.windowMs;
  const items = actual
    .slice(-MAX_SEQUENCE_ACTIONS)
    .filter((a): a is SequenceItem => isItem(a) && a.at >= since && a.at <= now);
  return matchInOrder(items, sequence.steps);
}
