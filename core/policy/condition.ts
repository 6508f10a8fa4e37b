import { RE2JS } from 're2js';
import { caseInsensitivePattern, foldCase, IDENTITY_FIELDS } from './case-fold.ts';
import { compileFieldPath, type FieldReader } from './field-path.ts';
import { OperatorInputSchema, type PolicyCondition } from './model.ts';
import { regexPrefilter } from './regex-prefilter.ts';
import { isScalar, scalarMembership, type Scalar } from './scalar-set.ts';
import { compileSteps, sequenceMatches, SequenceValueSchema, type CompiledSequence } from './sequence.ts';
import { SemanticCategorySchema, type SemanticCategory } from './semantic-judge.ts';

type ValueTest = (actual: unknown) => boolean;

/** A condition checked synchronously against a context value. */
export interface CompiledCheck {
  readonly kind: 'check';
  /** The field path as written. */
  readonly field: string;
  readonly read: FieldReader;
  readonly test: ValueTest;
  /** Relative cost (0 cheapest): conditions are ANDed, so cheap ones run first. */
  readonly cost: number;
  /**
   * How it reads a list or an object: its answer on one is shared only among checks that read it
   * alike. A scalar's is the same for every rule, but for a comparison's (`"5_000"`) and a
   * `matches`'s (whose `.` crosses a line break only for the rest).
   */
  readonly reading: ListReading;
  /**
   * Field, operator and value (and the reading, for a comparison): checks with the same key give
   * the same answer on one context, so an evaluation runs each once. Absent for `sequence`, whose
   * answer depends on the clock.
   */
  readonly key?: string;
  /** For a `sequence` condition: its steps (histories keep their partial matches) and category. */
  readonly sequence?: CompiledSequence;
}

/** A condition answered by the Semantic Judge: does the text at `field` show `intent`? */
export interface CompiledSemantic {
  readonly kind: 'semantic';
  readonly field: string;
  readonly read: FieldReader;
  readonly intent: string;
  /** A verdict below this confidence does not count as a violation. */
  readonly minConfidence: number;
  /** A tenant-defined category: the intent's description and labelled examples. */
  readonly category?: SemanticCategory;
  /** What a failed judgement (an LLM judge's timeout or error) means here; the judge's own mode when absent. */
  readonly onJudgeFailure?: 'closed' | 'open';
}

export type CompiledCondition = CompiledCheck | CompiledSemantic;

/** Why a condition cannot be compiled, and which of its parts is at fault. */
export interface ConditionFault {
  readonly part: 'field' | 'operator' | 'value';
  readonly description: string;
}

export type ConditionCompilation = { ok: true; condition: CompiledCondition } | { ok: false; fault: ConditionFault };

/**
 * How a test reads a list (`tool_hosts`, `user_roles`): for an allow every element must meet it,
 * so an allowed host named beside another one passes no allow; for a deny, a warning or an
 * approval some element is enough. Either way the list is the caller's, so it cannot widen what
 * the rule lets through.
 */
export type ListReading = 'every' | 'some';

const DEFAULT_MIN_CONFIDENCE = 0.5;

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Compiles a condition once (regex, sets, numbers) so evaluation does no parsing. */
export function compileCondition(condition: PolicyCondition, reading: ListReading): ConditionCompilation {
  let read: FieldReader;
  try {
    read = compileFieldPath(condition.field);
  } catch (error) {
    return fault('field', (error as Error).message);
  }
  if (condition.operator === 'semantic') return compileSemantic(condition.field, read, condition.value);
  if (condition.operator === 'sequence') return compileSequence(condition.field, read, condition.value);
  const restrictive = reading === 'some';
  const test = compileValueTest(condition.operator, condition.value, {
    reading,
    fold: IDENTITY_FIELDS.has(condition.field),
    unreadable: restrictive,
    crossLines: restrictive,
  });
  if (typeof test === 'string') return fault('value', test);
  const cost = condition.operator === 'matches' ? 2 : condition.operator === 'contains' ? 1 : 0;
  const readingKeyed = Object.hasOwn(ORDER, condition.operator) || condition.operator === 'matches';
  const key = `${readingKeyed ? reading : ''}\u0000${condition.operator}\u0000${condition.field}\u0000${JSON.stringify(condition.value)}`;
  return { ok: true, condition: { kind: 'check', field: condition.field, read, test, cost, key, reading } };
}

/**
 * How a test reads what it is given. `fold`: the field names an identity, compared without regard
 * to case. `unreadable`: the answer for a value present but not of the shape the operator reads
 * (a number that is not one, an object where a scalar is compared). The agent chooses the shape
 * of what it sends (`"5_000"`, `{"amount": {...}}`), so a deny, a warning or an approval holds on
 * such a value and an allow does not: a shape no rule foresaw is never a way around one.
 * `crossLines`: a `matches` pattern's `.` matches a line break too (RE2's `(?s)`). The agent
 * chooses where its text breaks, so `DROP\nTABLE` meets a deny's `drop.*table`; an allow's `.`
 * stops at one, so `^safe-.*$` does not admit `safe-x\nrm -rf /`.
 */
interface Reading {
  readonly reading: ListReading;
  readonly fold: boolean;
  readonly unreadable: boolean;
  readonly crossLines: boolean;
}

/** Returns the test, or a description of why the value does not suit the operator. */
function compileValueTest(
  operator: Exclude<PolicyCondition['operator'], 'semantic' | 'sequence'>,
  value: unknown,
  how: Reading,
): ValueTest | string {
  // `contains` asks about a list as a whole (does it hold the value?); the rest test each element.
  if (operator === 'contains') return compileContains(value, how);
  const test = compileElementTest(operator, value, how);
  if (typeof test === 'string') return test;
  // A deny's `matches` also reads a list whole, as its JSON text, as `contains` does.
  if (operator === 'matches' && how.unreadable)
    return (actual) => (Array.isArray(actual) ? actual.some(test) || test(actual) : test(actual));
  return overList(test, how.reading);
}

function compileElementTest(
  operator: Exclude<PolicyCondition['operator'], 'semantic' | 'sequence' | 'contains'>,
  value: unknown,
  how: Reading,
): ValueTest | string {
  switch (operator) {
    case 'eq':
    case 'neq': {
      if (!isScalar(value)) return `${operator} compares a string, number, boolean or null (use in/not_in for lists)`;
      return membershipTest(operator === 'eq', [value], how);
    }
    case 'in':
    case 'not_in': {
      if (!Array.isArray(value)) return `${operator} needs an array value`;
      const bad = value.findIndex((v) => !isScalar(v));
      if (bad >= 0) return `${operator} list element ${bad} is not a string, number, boolean or null`;
      return membershipTest(operator === 'in', value as Scalar[], how);
    }
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return compileComparison(operator, value, how.unreadable);
    case 'matches':
      return compileRegex(value, how);
  }
}

/** An empty list meets no allow: nothing in it was shown to be allowed. */
function overList(test: ValueTest, reading: ListReading): ValueTest {
  return reading === 'every'
    ? (actual) => (Array.isArray(actual) ? actual.length > 0 && actual.every(test) : test(actual))
    : (actual) => (Array.isArray(actual) ? actual.some(test) : test(actual));
}

/** A scalar as a folded field compares it: strings in folded case, the rest as they are. */
function foldScalar<T>(value: T): T | string {
  return typeof value === 'string' ? foldCase(value) : value;
}

function isStructured(actual: unknown): actual is object {
  return actual !== null && typeof actual === 'object';
}

function membershipTest(positive: boolean, values: readonly Scalar[], how: Reading): ValueTest {
  const member = scalarMembership(how.fold ? values.map(foldScalar) : values);
  const { unreadable } = how;
  if (how.fold) return (actual) => (isStructured(actual) ? unreadable : member(foldScalar(actual)) === positive);
  return (actual) => (isStructured(actual) ? unreadable : member(actual) === positive);
}

function compileComparison(
  operator: 'gt' | 'gte' | 'lt' | 'lte',
  value: unknown,
  unreadable: boolean,
): ValueTest | string {
  let bound: number;
  let asDate = false;
  if (typeof value === 'number' && Number.isFinite(value)) {
    bound = value;
  } else if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) {
    bound = Number(value);
  } else if (typeof value === 'string' && ISO_DATE.test(value) && Number.isFinite(Date.parse(value))) {
    bound = Date.parse(value);
    asDate = true;
  } else {
    return `${operator} needs a number or an ISO-8601 date`;
  }
  const toNumber = asDate ? dateOf : numberOf;
  // NaN (`"5_000"`, `"5000 USD"`, full-width digits) compares false: it takes the unreadable answer.
  // A null is a value not given, as a missing field is.
  const holds = ORDER[operator](bound);
  return (actual) => {
    const n = toNumber(actual);
    return Number.isNaN(n) ? actual !== null && unreadable : holds(n);
  };
}

const ORDER: Record<'gt' | 'gte' | 'lt' | 'lte', (bound: number) => (n: number) => boolean> = {
  gt: (bound) => (n) => n > bound,
  gte: (bound) => (n) => n >= bound,
  lt: (bound) => (n) => n < bound,
  lte: (bound) => (n) => n <= bound,
};

/** NaN for anything that is not a number. */
function numberOf(actual: unknown): number {
  if (typeof actual === 'number') return actual;
  if (typeof actual === 'string' && actual.trim() !== '') return Number(actual);
  return Number.NaN;
}

function dateOf(actual: unknown): number {
  if (typeof actual === 'string') return Date.parse(actual);
  if (typeof actual === 'number') return actual;
  if (actual instanceof Date) return actual.getTime();
  return Number.NaN;
}

/** An object or a list as the text `matches` and `contains` read; null when it has none (a cycle). */
function jsonText(actual: object): string | null {
  try {
    return JSON.stringify(actual);
  } catch {
    return null;
  }
}

function compileRegex(value: unknown, how: Reading): ValueTest | string {
  if (typeof value !== 'string') return 'matches needs a regular expression string';
  const pattern = how.fold ? caseInsensitivePattern(value) : value;
  let regex: RE2JS;
  try {
    // RE2 matches in linear time, so no pattern can stall the hot path (no backtracking).
    regex = RE2JS.compile(pattern, how.crossLines ? RE2JS.DOTALL : 0);
  } catch (error) {
    return `invalid or unsupported regular expression (linear-time RE2 syntax; no backreferences or lookaround): ${(error as Error).message}`;
  }
  const mayMatch = regexPrefilter(pattern);
  const search =
    mayMatch === null ? (text: string) => regex.test(text) : (text: string) => mayMatch(text) && regex.test(text);
  const { unreadable } = how;
  return (actual) => {
    if (typeof actual === 'string') return search(actual);
    if (typeof actual === 'number' || typeof actual === 'boolean') return search(String(actual));
    if (!isStructured(actual) || !unreadable) return false;
    const text = jsonText(actual);
    return text === null || search(text);
  };
}

function compileContains(value: unknown, how: Reading): ValueTest | string {
  if (!isScalar(value)) return 'contains needs a string (substring) or a scalar (array element)';
  const { fold, unreadable } = how;
  const element = scalarMembership([fold ? foldScalar(value) : value]);
  const needle = typeof value === 'string' ? (fold ? foldCase(value) : value) : null;
  const holds = fold ? (v: unknown) => element(foldScalar(v)) : element;
  const includes = fold
    ? (text: string) => needle !== null && foldCase(text).includes(needle)
    : (text: string) => needle !== null && text.includes(needle);
  return (actual) => {
    if (typeof actual === 'string') return includes(actual);
    if (Array.isArray(actual) && actual.some(holds)) return true;
    if (!isStructured(actual) || !unreadable) return false;
    // A deny reads an object or a list as its JSON text (`["bash","-c","rm -rf /"]` contains
    // `rm -rf`); a value that has none, or an object asked for a non-string, holds.
    if (needle === null) return !Array.isArray(actual);
    const text = jsonText(actual);
    return text === null || includes(text);
  };
}

function compileSemantic(field: string, read: FieldReader, value: unknown): ConditionCompilation {
  if (typeof value === 'string') {
    if (value.trim() === '') return fault('value', 'semantic needs a non-empty intent');
    return {
      ok: true,
      condition: { kind: 'semantic', field, read, intent: value, minConfidence: DEFAULT_MIN_CONFIDENCE },
    };
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const {
      intent,
      min_confidence: minConfidence = DEFAULT_MIN_CONFIDENCE,
      description,
      examples,
      counter_examples: counterExamples,
      on_judge_failure: onJudgeFailure,
    } = value as Record<string, unknown>;
    if (typeof intent !== 'string' || intent.trim() === '')
      return fault('value', 'semantic needs value.intent, a non-empty string');
    if (typeof minConfidence !== 'number' || !(minConfidence >= 0 && minConfidence <= 1)) {
      return fault('value', 'semantic value.min_confidence must be a number from 0 to 1');
    }
    if (onJudgeFailure !== undefined && onJudgeFailure !== 'closed' && onJudgeFailure !== 'open')
      return fault('value', 'semantic value.on_judge_failure must be closed or open');
    const condition: CompiledSemantic = {
      kind: 'semantic',
      field,
      read,
      intent,
      minConfidence,
      ...(onJudgeFailure === undefined ? {} : { onJudgeFailure }),
    };
    if (examples === undefined && counterExamples === undefined && description === undefined)
      return { ok: true, condition };
    const category = SemanticCategorySchema.safeParse({
      name: intent,
      description: description ?? '',
      examples,
      counter_examples: counterExamples ?? [],
    });
    if (!category.success) {
      const issue = category.error.issues[0];
      return fault('value', `semantic value.${issue?.path.join('.') ?? 'examples'}: ${issue?.message ?? 'invalid'}`);
    }
    return { ok: true, condition: { ...condition, category: Object.freeze(category.data) } };
  }
  return fault(
    'value',
    'semantic needs an intent string or { intent, min_confidence, on_judge_failure, description, examples, counter_examples }',
  );
}

/**
 * A `sequence` condition: the field (`recent_actions`) holds the earlier actions (a sidecar's, or
 * at the control plane a credential's), and they must show the steps in order within the window
 * before the evaluation. The steps' conditions are plain checks on an earlier action's fields.
 */
function compileSequence(field: string, read: FieldReader, value: unknown): ConditionCompilation {
  const parsed = SequenceValueSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : `.${issue.path.join('.')}`;
    return fault(
      'value',
      `sequence value${where}: ${issue?.message ?? 'invalid'} (value is { steps: [{ action, conditions }], within_seconds, category })`,
    );
  }
  const checks: CompiledCheck[][] = [];
  for (const [s, step] of parsed.data.steps.entries()) {
    const stepChecks: CompiledCheck[] = [];
    for (const [c, condition] of step.conditions.entries()) {
      const where = `sequence value.steps.${s}.conditions.${c}`;
      const operator = OperatorInputSchema.safeParse(condition.operator);
      if (!operator.success || operator.data === 'semantic' || operator.data === 'sequence')
        return fault(
          'value',
          `${where}.operator: not an operator of a step (eq, neq, in, not_in, matches, contains, gt…)`,
        );
      // A step detects what an earlier action did, as a deny does.
      const compiled = compileCondition(
        { field: condition.field, operator: operator.data, value: condition.value },
        'some',
      );
      if (!compiled.ok) return fault('value', `${where}.${compiled.fault.part}: ${compiled.fault.description}`);
      stepChecks.push(compiled.condition as CompiledCheck);
    }
    checks.push(stepChecks.sort((a, b) => a.cost - b.cost));
  }
  const sequence = compileSteps(parsed.data, checks);
  return {
    ok: true,
    condition: {
      kind: 'check',
      field,
      read,
      // The window ends at the evaluation: a pattern grows stale while the execution goes on.
      test: (actual) => sequenceMatches(sequence, actual, Date.now()),
      cost: 3,
      // The earlier actions are one history, matched whole whatever the rule's effect.
      reading: 'some',
      sequence,
    },
  };
}

function fault(part: ConditionFault['part'], description: string): ConditionCompilation {
  return { ok: false, fault: { part, description } };
}
