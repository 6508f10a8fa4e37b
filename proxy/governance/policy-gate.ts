import { sequencesToTrack, type BuiltinJudge } from '../../core/brain/index.ts';
import type { SvcCode } from '../../core/errors/index.ts';
import {
  evaluate,
  evaluateAsync,
  judgesToolNames,
  type CompiledRuleset,
  type EvaluationResult,
  type SemanticJudge,
  type SequenceShape,
} from '../../core/policy/index.ts';
import type { GovernanceMetrics } from '../metrics/index.ts';

export type PolicyFailMode = 'closed' | 'open';

/**
 * The signal that ends the wait of a held call, made only once a call is held: a joined signal
 * (`AbortSignal.any`) costs a few microseconds and weak references the collector must visit, on
 * every call that would otherwise never wait.
 */
export type HoldSignal = () => AbortSignal;

/** What a call that may be held brings: its wait's signal, and its request's decoded size. */
export interface Holding {
  signal: HoldSignal;
  /** Counted against `proxy_held_max_bytes` while the call is held. */
  bytes: number;
}

/** Holds a call a REQUIRE_APPROVAL decision stopped until its approval is decided (proxy/approvals). */
export interface ApprovalWait {
  await(
    action: string,
    context: Readonly<Record<string, unknown>>,
    verdict: GateVerdict,
    signal: AbortSignal,
    bytes: number,
  ): Promise<GateVerdict>;
}

/**
 * Context fields made only when a rule of the ruleset that evaluates the context reads them for
 * the action judged (a call's text, its exact count, its cost, a tool call's hosts). The gate
 * sets them on the context in the turn it picks the ruleset, so a ruleset that starts reading one
 * meanwhile finds it made all the same. One made undefined is left absent.
 */
export type MadeOnRead = Readonly<Record<string, () => unknown>>;

function make(
  ruleset: CompiledRuleset,
  action: string,
  context: Record<string, unknown>,
  made: MadeOnRead | undefined,
): void {
  if (made === undefined) return;
  const fields = ruleset.fieldsOf(action);
  for (const field in made) {
    if (!fields.has(field)) continue;
    const value = (made[field] as () => unknown)();
    if (value !== undefined) context[field] = value;
  }
}

export interface GateVerdict {
  allowed: boolean;
  /** Null when there was no ruleset to evaluate. */
  result: EvaluationResult | null;
  /** The refusal code when not allowed. */
  code: SvcCode;
  message: string;
  /** The deciding policy asks for the envelope to end (enforcement TERMINATE). */
  terminate: boolean;
}

/**
 * Evaluates actions (`llm:<model>`, `tool:<name>`, `network:connect`) against the locally held
 * ruleset: `check` is synchronous, no I/O, its SEMANTIC conditions decided by the in-process
 * built-in judge, only when evaluation reaches one. `checkJudged` asks the tenant's chosen judge
 * (the LLM judge, or both) when the tenant chose one and evaluation reaches a SEMANTIC
 * condition: model and tool calls wait for it; `network:connect` keeps the built-in judge.
 * Without any ruleset the configured fail mode decides. A call `checkJudged` is given the
 * client's abort signal for (`held`) is held while its approval is pending (REQUIRE_APPROVAL).
 */
export class PolicyGate {
  readonly #rulesets: { readonly current: CompiledRuleset | null };
  readonly #failMode: PolicyFailMode;
  readonly #metrics: GovernanceMetrics;
  readonly #judge: BuiltinJudge;
  readonly #chosen: SemanticJudge | undefined;
  readonly #approvals: ApprovalWait | undefined;

  constructor(
    rulesets: { readonly current: CompiledRuleset | null },
    failMode: PolicyFailMode,
    metrics: GovernanceMetrics,
    judge: BuiltinJudge,
    /** The tenant's judge when it chose the LLM judge (or both); absent: the built-in judge. */
    chosen?: SemanticJudge,
    /** Holds REQUIRE_APPROVAL calls; absent: they are refused at once with SVC-POL-2004. */
    approvals?: ApprovalWait,
  ) {
    this.#rulesets = rulesets;
    this.#failMode = failMode;
    this.#metrics = metrics;
    this.#judge = judge;
    this.#chosen = chosen;
    this.#approvals = approvals;
  }

  /** `made`: fields to set on `context` when the ruleset reads them, before it is evaluated. */
  async checkJudged(
    action: string,
    context: Record<string, unknown>,
    held?: Holding,
    made?: MadeOnRead,
  ): Promise<GateVerdict> {
    const ruleset = this.#rulesets.current;
    if (this.#chosen !== undefined && ruleset !== null && ruleset.needsJudge) make(ruleset, action, context, made);
    const verdict =
      this.#chosen === undefined || ruleset === null || !ruleset.needsJudge
        ? this.check(action, context, made)
        : this.#verdict(action, await evaluateAsync(ruleset, { action, context }, this.#chosen));
    if (verdict.allowed || verdict.result?.decision !== 'REQUIRE_APPROVAL') return verdict;
    if (this.#approvals === undefined || held === undefined) return verdict;
    return this.#approvals.await(action, context, verdict, held.signal(), held.bytes);
  }

  /** The sequences whose partial matches the sidecar's history keeps, for the current ruleset. */
  sequences(): readonly SequenceShape[] {
    return sequencesToTrack(this.#rulesets.current, this.#judge);
  }

  /** Whether a condition of the current ruleset reads this context field for the action. */
  reads(action: string, field: string): boolean {
    return this.#rulesets.current?.fieldsOf(action).has(field) ?? false;
  }

  /**
   * Whether a rule of the current ruleset can refuse or hold a tool for its name; without a
   * ruleset none can (the fail mode decides every call alike).
   */
  judgesToolNames(): boolean {
    const ruleset = this.#rulesets.current;
    return ruleset !== null && judgesToolNames(ruleset);
  }

  check(action: string, context: Record<string, unknown>, made?: MadeOnRead): GateVerdict {
    const ruleset = this.#rulesets.current;
    if (ruleset === null) {
      const allowed = this.#failMode === 'open';
      this.#metrics.policyEvaluations.inc({ decision: allowed ? 'ALLOW' : 'DENY' });
      return {
        allowed,
        result: null,
        code: 'SVC-POL-2001',
        message: `no policy ruleset available; ${action} refused (policy fail mode closed)`,
        terminate: false,
      };
    }
    make(ruleset, action, context, made);
    return this.#verdict(action, evaluate(ruleset, { action, context }, this.#judge));
  }

  #verdict(action: string, result: EvaluationResult): GateVerdict {
    this.#metrics.policyEvaluations.inc({ decision: result.decision });
    this.#metrics.policyLatency.observe(result.evaluation_time_ms / 1000);
    const code: SvcCode = result.decision === 'REQUIRE_APPROVAL' ? 'SVC-POL-2004' : 'SVC-POL-2001';
    return {
      allowed: result.allowed,
      result,
      code,
      message: `${action}: ${result.reason}`,
      terminate: !result.allowed && result.enforcement === 'TERMINATE',
    };
  }
}
