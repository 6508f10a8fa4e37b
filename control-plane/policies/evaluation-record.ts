import type { Actor, AuditRecord } from '../../core/domain/index.ts';
import type { Decision } from '../../core/policy/index.ts';
import type { AuditEntry } from '../audit/audit-log.ts';

/** An evaluation as either side writes its audit record: the control plane's, or a proxy's denial. */
export interface EvaluationFacts {
  actor: Actor;
  action: string;
  envelopeId: string | null;
  decision: string;
  /** Null when no policy decided (a default deny, or a refusal no one rule made). */
  matchedPolicy: string | null;
  matchedRule: string | null;
  semantic: object | undefined;
  /** What only one side knows: shadow policies and the approval, or a proxy's message and time. */
  more: Record<string, unknown>;
}

/** The `policy.evaluate` audit entry that `recordedEvaluation` reads back. */
export function evaluationEntry(facts: EvaluationFacts): AuditEntry {
  return {
    actor: facts.actor,
    action: 'policy.evaluate',
    resource:
      facts.envelopeId !== null ? { type: 'envelope', id: facts.envelopeId } : { type: 'action', id: facts.action },
    result: facts.decision.toLowerCase(),
    metadata: {
      action: facts.action,
      matched_policy: facts.matchedPolicy,
      matched_rule: facts.matchedRule,
      ...facts.more,
      ...(facts.semantic === undefined ? {} : { semantic: facts.semantic }),
    },
  };
}

/** One policy evaluation, as its `policy.evaluate` audit record tells it. */
export interface RecordedEvaluation {
  evaluation_id: string;
  evaluated_at: string;
  action: string;
  decision: Decision;
  matched_policy: string | null;
  matched_rule: string | null;
  /** Policies in AUDIT that would have decided: recorded, not enforced. */
  shadow: Array<{ policy_id: string; rule_id: string; decision: Decision }>;
  approval_id: string | null;
  envelope_id: string | null;
  actor: Actor;
}

/**
 * Reads an evaluation's audit record, whichever side wrote it: the control plane's own
 * evaluations and the denials proxies report through the event processor.
 */
export function recordedEvaluation(record: AuditRecord): RecordedEvaluation {
  const meta = record.metadata as {
    action?: unknown;
    matched_policy?: string | null;
    matched_rule?: string | null;
    shadow?: Array<{ policy_id: string; rule_id: string; decision: Decision }>;
    approval_id?: string | null;
  };
  return {
    evaluation_id: record.audit_id,
    evaluated_at: record.timestamp,
    action: typeof meta.action === 'string' ? meta.action : '',
    decision: record.result.toUpperCase() as Decision,
    matched_policy: meta.matched_policy ?? null,
    matched_rule: meta.matched_rule ?? null,
    shadow: meta.shadow ?? [],
    approval_id: meta.approval_id ?? null,
    envelope_id: record.resource.type === 'envelope' ? record.resource.id : null,
    actor: record.actor,
  };
}
