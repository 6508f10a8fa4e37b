import { subjects } from '../../core/bus/subjects.ts';
import type { Actor, Envelope, EnvelopeStatus } from '../../core/domain/index.ts';
import { isFinal, isTerminated } from '../../core/domain/index.ts';
import type { EnvelopeLifecycleMessage } from '../../core/events/messages.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import type { Effects } from '../effects/effects.ts';
import type { Store } from '../store/store.ts';

const SUBJECT_OF: Partial<Record<EnvelopeStatus, (tenant: string) => string>> = {
  RUNNING: subjects.envelopeStarted,
  COMPLETED: subjects.envelopeCompleted,
  FAILED: subjects.envelopeFailed,
  TERMINATED: subjects.envelopeTerminated,
  BUDGET_EXCEEDED: subjects.envelopeTerminated,
  POLICY_VIOLATION: subjects.envelopeTerminated,
  TIMEOUT: subjects.envelopeTerminated,
};

export function lifecycleMessage(envelope: Envelope, force = false): EnvelopeLifecycleMessage {
  return {
    tenant_id: envelope.tenant_id,
    envelope_id: envelope.envelope_id,
    execution_id: envelope.execution_id,
    budget_id: envelope.budget_id,
    status: envelope.status,
    reason: envelope.status_reason,
    force,
    occurred_at: envelope.updated_at,
  };
}

/** Where a budget's live envelopes are indexed, so exceeding it can end them all. */
export function budgetIndexId(budgetId: string, envelopeId: string): string {
  return `${budgetId}/${envelopeId}`;
}

/**
 * Stages one status change of an envelope in the current transaction: the record, the budget index,
 * the audit record, and the lifecycle publication to send after commit. Callers have checked that
 * the move is allowed.
 */
export function applyTransition(
  deps: { store: Store; audit: AuditLog },
  envelope: Envelope,
  to: EnvelopeStatus,
  change: { reason: string | null; actor: Actor; now: Date; force?: boolean },
  effects: Effects,
): Envelope {
  const at = change.now.toISOString();
  const next: Envelope = {
    ...envelope,
    status: to,
    status_reason: change.reason,
    updated_at: at,
    completed_at: isFinal(to) ? at : envelope.completed_at,
  };
  const tenant = envelope.tenant_id;
  deps.store.put(tenant, 'envelope', next.envelope_id, next);
  if (isFinal(to) && next.budget_id !== null)
    deps.store.remove(tenant, 'budget_envelope', budgetIndexId(next.budget_id, next.envelope_id));
  deps.audit.append(tenant, {
    actor: change.actor,
    action: isFinal(to) && to !== 'COMPLETED' && to !== 'FAILED' ? 'envelope.terminate' : 'envelope.update_status',
    resource: { type: 'envelope', id: next.envelope_id },
    result: to.toLowerCase(),
    metadata: { from: envelope.status, to, reason: change.reason },
  });
  const subject = SUBJECT_OF[to];
  if (subject !== undefined) {
    effects.publications.push({
      subject: subject(tenant),
      data: lifecycleMessage(next, change.force ?? false),
      msgId: `env-${next.envelope_id}-${to}`,
    });
  }
  if (isTerminated(to)) {
    effects.signals.push({
      tenant_id: tenant,
      envelope_id: next.envelope_id,
      execution_id: next.execution_id,
      budget_id: next.budget_id,
      reason: change.reason ?? to.toLowerCase(),
      force: change.force ?? false,
    });
  }
  return next;
}
