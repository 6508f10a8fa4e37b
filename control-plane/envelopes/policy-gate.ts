import type { EvaluationResult } from '../../core/policy/index.ts';
import type { Caller } from '../caller.ts';
import type { Effects } from '../effects/effects.ts';
import type { Repositories } from '../storage/storage.ts';

/**
 * What envelope creation needs from the policy service: a decision for an action, with the audit
 * record, violation event and any pending approval already written and announced.
 */
export interface PolicyGate {
  decide(caller: Caller, input: PolicyQuestion): Promise<PolicyDecision>;
  /**
   * The decision without its records, for a caller that writes them in a transaction of its own
   * change (envelope creation: one commit for the decision and the envelope).
   */
  prepare(caller: Caller, input: PolicyQuestion): Promise<PreparedDecision>;
}

export interface PreparedDecision {
  result: EvaluationResult;
  /** Writes the audit record, violation event and any pending approval; resolves with the approval's id. */
  record(tx: Repositories, effects: Effects): Promise<string | null>;
  /** Call once `record`'s transaction committed: an allowed action joins its credential's history. */
  recorded(): void;
}

export interface PolicyQuestion {
  action: string;
  context: Record<string, unknown>;
  policySet?: string[] | undefined;
  envelopeId?: string | undefined;
  /**
   * Decide only: no audit record, no violation event, no pending approval (gRPC dry_run). A
   * caller without envelopes:write always decides only (Policies.decide).
   */
  dryRun?: boolean | undefined;
}

export interface PolicyDecision {
  result: EvaluationResult;
  approvalId: string | null;
}
