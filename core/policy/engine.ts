import { indexActions, type ActionIndex } from './action-index.ts';
import { foldCase } from './case-fold.ts';
import { compilePolicy, type CompiledPolicy, type CompiledRule } from './compile-policy.ts';
import { CheckAnswers, numberChecks, type CheckTable } from './check-answers.ts';
import type { CompiledSemantic } from './condition.ts';
import { modelAlias } from './model-alias.ts';
import type { Policy } from './model.ts';
import type { EvaluationResult, PolicyWarning, SemanticFinding, ShadowDecision } from './result.ts';
import type { SequenceShape } from './sequence.ts';
import { JudgeVerdictSchema, type JudgeVerdict, type SemanticJudge, type SyncSemanticJudge } from './semantic-judge.ts';
import { UNKNOWN_VALUE } from './unknown-value.ts';

/** One rule in evaluation order, with the index where its policy's rules end. */
export interface RuleStep {
  readonly policy: CompiledPolicy;
  readonly rule: CompiledRule;
  readonly policyEnd: number;
  /** Texts built at compile time, so evaluation does not format strings. */
  readonly reason: string;
  readonly warning: string;
  /** The number of each of the rule's checks in the ruleset's `checks` table. */
  readonly checkIds: Int32Array;
}

export interface CompiledRuleset {
  readonly version: number | string;
  /** ACTIVE policies, highest priority first. */
  readonly policies: readonly CompiledPolicy[];
  readonly steps: readonly RuleStep[];
  /** The steps each action can match, so a walk skips the rest. */
  readonly index: ActionIndex;
  /** True when some rule has a SEMANTIC condition: use `evaluateAsync` with a judge. */
  readonly needsJudge: boolean;
  /**
   * The distinct steps of the rules' `sequence` conditions, in evaluation order: the histories
   * keep the partial matches of these.
   */
  readonly sequences: readonly SequenceShape[];
  /**
   * The context fields, as written, that the conditions of the rules that can apply to an action
   * of `action`'s type read (`tool:` rules for a tool call, `llm:` rules for a model's): a costly
   * field is made only for an action such a rule reads it for.
   */
  readonly fieldsOf: (action: string) => ReadonlySet<string>;
  /** The rules' distinct checks, numbered. */
  readonly checks: CheckTable;
  /** Answers reused by one synchronous evaluation at a time. */
  readonly answers: CheckAnswers;
}

export interface EvaluationInput {
  readonly action: string;
  readonly context: Readonly<Record<string, unknown>>;
  /** Policy ids or names that take part; empty or absent means all. */
  readonly policySet?: readonly string[] | undefined;
}

export interface AsyncEvaluationOptions {
  /** A judge slower than this counts as failed, and its conditions resolve fail-closed. */
  readonly judgeTimeoutMs?: number;
}

const DEFAULT_JUDGE_TIMEOUT_MS = 5000;

/**
 * Compiles a ruleset once per version: only ACTIVE policies, ordered by priority (highest
 * first), then created_at and policy_id so the order is stable across processes.
 * Throws SVC-POL-2003 if a policy cannot be compiled.
 */
export function compileRuleset(policies: readonly Policy[], version: number | string): CompiledRuleset {
  const ordered = policies
    .filter((p) => p.status === 'ACTIVE')
    .sort(
      (a, b) =>
        b.priority - a.priority || compareText(a.created_at, b.created_at) || compareText(a.policy_id, b.policy_id),
    );
  const compiled = ordered.map(compilePolicy);
  const rules = compiled.flatMap((policy) => policy.rules);
  const index = indexActions(rules);
  const checks = numberChecks(rules);
  const steps: RuleStep[] = [];
  for (const policy of compiled) {
    const policyEnd = steps.length + policy.rules.length;
    for (const rule of policy.rules) {
      const checkIds = checks.ids[steps.length] as Int32Array;
      steps.push({ policy, rule, policyEnd, checkIds, ...describe(policy, rule) });
    }
  }
  return {
    version,
    policies: compiled,
    steps,
    index,
    needsJudge: rules.some((rule) => rule.semantic.length > 0),
    sequences: [
      ...new Map(
        rules.flatMap((rule) => rule.checks.flatMap((c) => (c.sequence ? [[c.sequence.key, c.sequence]] : []))),
      ).values(),
    ],
    fieldsOf: fieldsByType(rules, index),
    checks,
    answers: new CheckAnswers(checks),
  };
}

/** The fields per action type, worked out on the type's first action: one set per list of the index. */
function fieldsByType(rules: readonly CompiledRule[], index: ActionIndex): (action: string) => ReadonlySet<string> {
  const known = new WeakMap<Int32Array, ReadonlySet<string>>();
  return (action) => {
    const ofType = index.ofType(foldCase(action));
    let fields = known.get(ofType);
    if (fields === undefined) {
      const read = new Set<string>();
      for (const i of ofType) {
        const rule = rules[i] as CompiledRule;
        for (const check of rule.checks) read.add(check.field);
        for (const semantic of rule.semantic) read.add(semantic.field);
      }
      fields = read;
      known.set(ofType, fields);
    }
    return fields;
  };
}

function describe(policy: CompiledPolicy, rule: CompiledRule): Pick<RuleStep, 'reason' | 'warning'> {
  const label = `policy "${policy.name}" rule "${rule.name === '' ? rule.ruleId : rule.name}"`;
  const suffix = rule.message === undefined ? '' : `: ${rule.message}`;
  switch (rule.decision) {
    case 'ALLOW':
      return { reason: `allowed by ${label}${suffix}`, warning: '' };
    case 'WARN':
      return { reason: `warned by ${label}${suffix}`, warning: rule.message ?? `warned by ${label}` };
    case 'DENY':
      return { reason: `denied by ${label}${suffix}`, warning: `would deny (${label})${suffix}` };
    case 'REQUIRE_APPROVAL':
      return {
        reason: `approval required by ${label}${suffix}`,
        warning: `would require approval (${label})${suffix}`,
      };
  }
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Per-call evaluation state. */
interface WalkState {
  /** The action case-folded. */
  readonly action: string;
  readonly warnings: PolicyWarning[];
  readonly shadow: ShadowDecision[];
  firstWarning: RuleStep | null;
  decidedBy: RuleStep | null;
  unjudged: boolean;
  judgeFailure: string | null;
  /**
   * Why a SEMANTIC condition's text was not judged whole: it went beyond what the judge reads (its
   * characters, values or nesting), or its value is not known yet.
   */
  unread: string | null;
  /** What the judge found for each rule whose SEMANTIC conditions it found violated. */
  findings: Map<RuleStep, SemanticFinding> | null;
  readonly answers: CheckAnswers;
  /** The call under its model's family name, when it used another (`llm:gpt-4o-2024-08-06`). */
  readonly alias: AliasWalk | null;
}

/** What a walk needs of the call under the model's family name: its rules, context and answers. */
interface AliasWalk {
  readonly matching: Int32Array;
  readonly context: Readonly<Record<string, unknown>>;
  readonly answers: CheckAnswers;
}

/** Answers a rule's SEMANTIC conditions: true/false, or undefined to pause the walk there. */
type SemanticAnswer = (
  step: RuleStep,
  index: number,
  context: Readonly<Record<string, unknown>>,
  state: WalkState,
) => boolean | undefined;

const DONE = -1;
const CONTINUE = 0;
const NEXT_POLICY = 1;
const DECIDED = 2;

/**
 * Evaluates synchronously. SEMANTIC conditions are answered by `judge` in process when one is
 * given (the proxy's built-in judge), and only for rules whose action and other conditions
 * already match. Without a judge a ruleset that needs one is still answered, never silently
 * allowed: an unjudged SEMANTIC condition counts as violated for DENY, WARN and
 * REQUIRE_APPROVAL rules and as not violated for ALLOW rules (fail closed), and `reason` says so.
 */
export function evaluate(
  ruleset: CompiledRuleset,
  input: EvaluationInput,
  judge?: SyncSemanticJudge,
): EvaluationResult {
  const started = performance.now();
  // A judge that evaluates again from inside this walk gets answers of its own.
  const answers = ruleset.answers.inUse ? new CheckAnswers(ruleset.checks) : ruleset.answers;
  const state = newState(ruleset, input, answers);
  const answer: SemanticAnswer =
    judge === undefined ? resolveFailClosed : (step, _index, context) => judgeRuleNow(step, context, judge, state);
  answers.inUse = true;
  try {
    walk(ruleset, input, state, 0, answer);
  } finally {
    answers.end();
    answers.inUse = false;
  }
  return finish(state, started);
}

/** Evaluates, asking the judge only for rules whose action and other conditions already match. */
export async function evaluateAsync(
  ruleset: CompiledRuleset,
  input: EvaluationInput,
  judge: SemanticJudge,
  options: AsyncEvaluationOptions = {},
): Promise<EvaluationResult> {
  if (!ruleset.needsJudge) return evaluate(ruleset, input);
  const started = performance.now();
  // Its walk pauses for the judge while other evaluations run, so it keeps answers of its own.
  const state = newState(ruleset, input, new CheckAnswers(ruleset.checks));
  const timeoutMs = options.judgeTimeoutMs ?? DEFAULT_JUDGE_TIMEOUT_MS;
  let judgedIndex = DONE;
  let judgedVerdict = false;
  const answer: SemanticAnswer = (_step, index) => (index === judgedIndex ? judgedVerdict : undefined);
  for (let from = 0; ;) {
    const pausedAt = walk(ruleset, input, state, from, answer);
    if (pausedAt === DONE) break;
    const step = ruleset.steps[pausedAt];
    if (step === undefined) break;
    judgedVerdict = await judgeRule(step, input.context, judge, timeoutMs, state);
    judgedIndex = pausedAt;
    from = pausedAt;
  }
  return finish(state, started);
}

function newState(ruleset: CompiledRuleset, input: EvaluationInput, answers: CheckAnswers): WalkState {
  answers.begin();
  const action = foldCase(input.action);
  const alias = modelAlias(action, input.context);
  let aliasWalk: AliasWalk | null = null;
  if (alias !== null) {
    aliasWalk = {
      matching: ruleset.index.matching(alias.action),
      context: alias.context,
      answers: new CheckAnswers(ruleset.checks),
    };
    aliasWalk.answers.begin();
  }
  return {
    warnings: [],
    shadow: [],
    firstWarning: null,
    decidedBy: null,
    unjudged: false,
    judgeFailure: null,
    unread: null,
    // Made when the judge first finds something: most evaluations never need it.
    findings: null,
    answers,
    alias: aliasWalk,
    action,
  };
}

/** Walks rules from `from` until one decides (DONE) or a semantic answer is needed (its index). */
function walk(
  ruleset: CompiledRuleset,
  input: EvaluationInput,
  state: WalkState,
  from: number,
  answer: SemanticAnswer,
): number {
  const { steps } = ruleset;
  const { context, policySet } = input;
  // A tool, a model or a host is one whatever the case it is named in: a server may match a tool
  // name without regard to case, so `tool:DeleteRepo` must not be walked around as `deleterepo`.
  const matching = ruleset.index.matching(state.action);
  const { alias } = state;
  const candidates = alias === null ? matching : union(matching, alias.matching);
  const restricted = policySet !== undefined && policySet.length > 0;
  let selectedUntil = from;
  // `next` is the first step still to consider: jumps past a policy move it, candidates before it are skipped.
  let next = from;
  for (let c = 0; c < candidates.length; c++) {
    const i = candidates[c] as number;
    if (i < next) continue;
    const step = steps[i] as RuleStep;
    if (restricted && i >= selectedUntil) {
      if (!policySet.includes(step.policy.policyId) && !policySet.includes(step.policy.name)) {
        next = step.policyEnd;
        continue;
      }
      selectedUntil = step.policyEnd;
    }
    const { rule } = step;
    const applies = (alias === null || has(matching, i)) && state.answers.pass(rule.checks, step.checkIds, context);
    if (!applies && (alias === null || !appliesUnderFamily(alias, step, i))) continue;
    if (rule.semantic.length > 0) {
      const verdict = readsUnknown(step, context, state) ? failClosedVerdict(rule) : answer(step, i, context, state);
      if (verdict === undefined) return i;
      if (!verdict) continue;
    }
    const applied = apply(state, step);
    if (applied === DECIDED) return DONE;
    next = applied === NEXT_POLICY ? step.policyEnd : i + 1;
  }
  return DONE;
}

/**
 * A deny, a warning or an approval also holds on the call under its model's family name
 * (`model eq "gpt-4o"` on `gpt-4o-2024-08-06`); an allow only on the name sent, so a rule that
 * allows one snapshot allows no other.
 */
function appliesUnderFamily(alias: AliasWalk, step: RuleStep, i: number): boolean {
  const { rule } = step;
  return (
    rule.decision !== 'ALLOW' && has(alias.matching, i) && alias.answers.pass(rule.checks, step.checkIds, alias.context)
  );
}

/** Whether an ascending list holds `value`. */
function has(sorted: Int32Array, value: number): boolean {
  let low = 0;
  let high = sorted.length - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const at = sorted[middle] as number;
    if (at === value) return true;
    if (at < value) low = middle + 1;
    else high = middle - 1;
  }
  return false;
}

/** The ascending union of two ascending lists. */
function union(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < a.length || j < b.length) {
    const x = i < a.length ? (a[i] as number) : Infinity;
    const y = j < b.length ? (b[j] as number) : Infinity;
    out[n++] = Math.min(x, y);
    if (x <= y) i++;
    if (y <= x) j++;
  }
  return out.subarray(0, n);
}

/** Records what a matching rule means under its policy's enforcement. */
function apply(state: WalkState, step: RuleStep): number {
  const { policy, rule } = step;
  if (policy.enforcement === 'AUDIT') {
    state.shadow.push({ policy_id: policy.policyId, rule_id: rule.ruleId, decision: rule.decision });
    return rule.decision === 'WARN' ? CONTINUE : NEXT_POLICY;
  }
  if (rule.decision === 'WARN') {
    addWarning(state, step);
    return CONTINUE;
  }
  if (policy.enforcement === 'WARN' && rule.decision !== 'ALLOW') {
    addWarning(state, step);
    return NEXT_POLICY;
  }
  state.decidedBy = step;
  return DECIDED;
}

function addWarning(state: WalkState, step: RuleStep): void {
  state.firstWarning ??= step;
  state.warnings.push({ policy_id: step.policy.policyId, rule_id: step.rule.ruleId, message: step.warning });
}

function finish(state: WalkState, started: number): EvaluationResult {
  const { decidedBy, firstWarning, warnings, shadow } = state;
  const note = failClosedNote(state);
  const semantic = state.findings?.get((decidedBy ?? firstWarning) as RuleStep);
  const base = { warnings, shadow, evaluation_time_ms: 0 };
  let result: EvaluationResult;
  if (decidedBy !== null) {
    const { policy, rule } = decidedBy;
    const allowed = rule.decision === 'ALLOW';
    result = {
      ...base,
      decision: rule.decision,
      allowed,
      effect: allowed ? 'allow' : 'deny',
      matched_policy: policy.policyId,
      matched_policy_name: policy.name,
      matched_rule: rule.ruleId,
      matched_action: rule.action,
      enforcement: policy.enforcement,
      reason: note === '' ? decidedBy.reason : decidedBy.reason + note,
      ...(rule.message === undefined ? {} : { message: rule.message }),
    };
  } else if (firstWarning !== null) {
    result = {
      ...base,
      decision: 'WARN',
      allowed: true,
      effect: 'allow',
      matched_policy: firstWarning.policy.policyId,
      matched_policy_name: firstWarning.policy.name,
      matched_rule: firstWarning.rule.ruleId,
      matched_action: firstWarning.rule.action,
      enforcement: null,
      reason: `allowed with ${warnings.length} warning(s), first: ${firstWarning.reason}${note}`,
    };
  } else {
    result = {
      ...base,
      decision: 'ALLOW',
      allowed: true,
      effect: 'no_match',
      matched_policy: null,
      matched_policy_name: null,
      matched_rule: null,
      matched_action: null,
      enforcement: null,
      reason: note === '' ? 'no policy rule matched' : `no policy rule matched${note}`,
    };
  }
  const sequence = (decidedBy ?? firstWarning)?.rule.sequence;
  if (sequence !== undefined) result.sequence = { category: sequence };
  if (semantic !== undefined && result.matched_rule !== null) {
    result.semantic = semantic;
    result.reason += `; ${describeFinding(semantic)}`;
  }
  result.evaluation_time_ms = performance.now() - started;
  return result;
}

/** `judged DESTRUCTIVE (0.95) at tool_args.sql[0,10) "DROP TABLE"`: what the agent and the audit read. */
function describeFinding(finding: SemanticFinding): string {
  const first = finding.evidence[0];
  const where =
    first === undefined ? '' : ` at ${first.field}[${first.start},${first.end}) ${JSON.stringify(first.excerpt)}`;
  return `judged ${finding.category ?? 'violated'} (${finding.confidence.toFixed(2)}) by the ${finding.judge} judge${where}`;
}

function failClosedNote(state: WalkState): string {
  if (state.unread !== null) return `; ${state.unread}, semantic conditions resolved fail-closed`;
  if (state.judgeFailure !== null)
    return `; semantic judge failed (${state.judgeFailure}), semantic conditions resolved fail-closed`;
  if (state.unjudged) return '; semantic conditions not judged (no judge), resolved fail-closed';
  return '';
}

/** The text a semantic condition judges (structured values as JSON), or undefined when its field is missing. */
function semanticText(condition: CompiledSemantic, context: Readonly<Record<string, unknown>>): string | undefined {
  const value = condition.read(context);
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.join('\n');
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  try {
    return JSON.stringify(value);
  } catch {
    // A cyclic or otherwise unserialisable value cannot be judged: the condition does not match.
    return undefined;
  }
}

/** Whether a SEMANTIC condition of the rule reads a value not known yet: the rule then fails closed, unjudged. */
function readsUnknown(step: RuleStep, context: Readonly<Record<string, unknown>>, state: WalkState): boolean {
  const condition = step.rule.semantic.find((c) => c.read(context) === UNKNOWN_VALUE);
  if (condition === undefined) return false;
  state.unread = `${condition.field} is not known yet`;
  return true;
}

/** Fail closed: restrictive rules apply, ALLOW rules do not. */
function failClosedVerdict(rule: CompiledRule): boolean {
  return rule.decision !== 'ALLOW';
}

const resolveFailClosed: SemanticAnswer = (step, _index, context, state) => {
  if (step.rule.semantic.some((c) => semanticText(c, context) === undefined)) return false;
  state.unjudged = true;
  return failClosedVerdict(step.rule);
};

/** All of a rule's SEMANTIC conditions must be judged violated (with enough confidence). */
async function judgeRule(
  step: RuleStep,
  context: Readonly<Record<string, unknown>>,
  judge: SemanticJudge,
  timeoutMs: number,
  state: WalkState,
): Promise<boolean> {
  const verdicts: Verdicts = [];
  for (const condition of step.rule.semantic) {
    const text = semanticText(condition, context);
    if (text === undefined) return false;
    let verdict: JudgeVerdict;
    try {
      verdict = JudgeVerdictSchema.parse(
        await withTimeout(judge.judge(judgeInput(condition, text, context)), timeoutMs),
      );
    } catch (error) {
      return judgeFailed(step, condition, error, state);
    }
    const answer = weigh(step, condition, verdict, state);
    if (answer !== undefined) return answer;
    verdicts.push(verdict);
  }
  record(step, judge, verdicts, state);
  return true;
}

/** The same, answered in process by a synchronous judge (the hot path waits on nothing). */
function judgeRuleNow(
  step: RuleStep,
  context: Readonly<Record<string, unknown>>,
  judge: SyncSemanticJudge,
  state: WalkState,
): boolean {
  const verdicts: Verdicts = [];
  for (const condition of step.rule.semantic) {
    const text = semanticText(condition, context);
    if (text === undefined) return false;
    let verdict: JudgeVerdict;
    try {
      verdict = JudgeVerdictSchema.parse(judge.judgeNow(judgeInput(condition, text, context)));
    } catch (error) {
      return judgeFailed(step, condition, error, state);
    }
    const answer = weigh(step, condition, verdict, state);
    if (answer !== undefined) return answer;
    verdicts.push(verdict);
  }
  record(step, judge, verdicts, state);
  return true;
}

type Verdicts = JudgeVerdict[];

/**
 * Whether a rule holds when its judge could not answer one of its conditions: a condition that
 * chose to fail open does not hold; otherwise the rule resolves fail-closed and the reason says why.
 */
function judgeFailed(step: RuleStep, condition: CompiledSemantic, error: unknown, state: WalkState): boolean {
  if (condition.onJudgeFailure === 'open') return false;
  state.judgeFailure = error instanceof Error ? error.message : String(error);
  return failClosedVerdict(step.rule);
}

function judgeInput(condition: CompiledSemantic, text: string, context: Readonly<Record<string, unknown>>) {
  return {
    text,
    intent: condition.intent,
    field: condition.field,
    context: { ...context },
    ...(condition.category === undefined ? {} : { category: condition.category }),
    ...(condition.onJudgeFailure === undefined ? {} : { failMode: condition.onJudgeFailure }),
  };
}

/**
 * Undefined when the condition is violated (go on to the rule's next one), else the rule's
 * answer: not violated, or, when the judge could not read all of the text, fail closed.
 */
function weigh(
  step: RuleStep,
  condition: CompiledSemantic,
  verdict: JudgeVerdict,
  state: WalkState,
): boolean | undefined {
  if (verdict.violated && verdict.confidence >= condition.minConfidence) return undefined;
  if (verdict.truncated) {
    state.unread = `text at ${condition.field} goes beyond what the semantic judge reads`;
    return failClosedVerdict(step.rule);
  }
  return false;
}

function record(step: RuleStep, judge: SemanticJudge, verdicts: Verdicts, state: WalkState): void {
  const strongest = verdicts.reduce<JudgeVerdict | undefined>(
    (best, v) => (best === undefined || v.confidence > best.confidence ? v : best),
    undefined,
  );
  if (strongest === undefined) return;
  state.findings ??= new Map();
  state.findings.set(step, {
    judge: judge.name,
    judge_version: judge.version,
    category: strongest.category ?? null,
    confidence: strongest.confidence,
    evidence: verdicts.flatMap((v) => v.evidence),
  });
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`judge timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
