import type { SvcCode } from '../../core/errors/index.ts';
import {
  evaluate,
  evaluateAsync,
  type CompiledRuleset,
  type EvaluationResult,
  type SemanticJudge,
  type SyncSemanticJudge,
} from '../../core/policy/index.ts';
import type { GovernanceMetrics } from '../metrics/index.ts';

export type PolicyFailMode = 'closed' | 'open';

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
 * Without any ruleset the configured fail mode decides.
 */
export class PolicyGate {
  readonly #rulesets: { readonly current: CompiledRuleset | null };
  readonly #failMode: PolicyFailMode;
  readonly #metrics: GovernanceMetrics;
  readonly #judge: SyncSemanticJudge;
  readonly #chosen: SemanticJudge | undefined;

  constructor(
    rulesets: { readonly current: CompiledRuleset | null },
    failMode: PolicyFailMode,
    metrics: GovernanceMetrics,
    judge: SyncSemanticJudge,
    /** The tenant's judge when it chose the LLM judge (or both); absent: the built-in judge. */
    chosen?: SemanticJudge,
  ) {
    this.#rulesets = rulesets;
    this.#failMode = failMode;
    this.#metrics = metrics;
    this.#judge = judge;
    this.#chosen = chosen;
  }

  async checkJudged(action: string, context: Readonly<Record<string, unknown>>): Promise<GateVerdict> {
    const ruleset = this.#rulesets.current;
    if (this.#chosen === undefined || ruleset === null || !ruleset.needsJudge) return this.check(action, context);
    return this.#verdict(action, await evaluateAsync(ruleset, { action, context }, this.#chosen));
  }

  check(action: string, context: Readonly<Record<string, unknown>>): GateVerdict {
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
