import type { EvaluationResult } from '../../core/policy/index.ts';
import type { Caller } from '../caller.ts';

/**
 * What envelope creation needs from the policy service: a decision for an action, with the audit
 * record, violation event and any pending approval already written and announced.
 */
export interface PolicyGate {
  decide(caller: Caller, input: PolicyQuestion): Promise<PolicyDecision>;
}

export interface PolicyQuestion {
  action: string;
  context: Record<string, unknown>;
  policySet?: string[] | undefined;
  envelopeId?: string | undefined;
  /** Decide only: no audit record, no violation event, no pending approval (gRPC dry_run). */
  dryRun?: boolean | undefined;
}

export interface PolicyDecision {
  result: EvaluationResult;
  approvalId: string | null;
}
