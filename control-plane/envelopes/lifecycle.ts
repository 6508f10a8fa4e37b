import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import type { Actor, Envelope, EnvelopeStatus } from '../../core/domain/index.ts';
import { isFinal, isTerminated } from '../../core/domain/index.ts';
import type { EnvelopeLifecycleMessage } from '../../core/events/messages.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import type { Effects } from '../effects/effects.ts';
import type { Repositories } from '../storage/storage.ts';

const SUBJECT_OF: Partial<Record<EnvelopeStatus, (tenant: string) => string>> = {
  RUNNING: subjects.envelopeStarted,
  COMPLETED: subjects.envelopeCompleted,
  FAILED: subjects.envelopeFailed,
  TERMINATED: subjects.envelopeTerminated,
  BUDGET_EXCEEDED: subjects.envelopeTerminated,
  POLICY_VIOLATION: subjects.envelopeTerminated,
  TIMEOUT: subjects.envelopeTerminated,
};

/** How the reason of a pause the Immune System asked for begins. */
const IMMUNE_PAUSE = 'immune system: ';

/** The reason recorded when a proxy's Immune System pauses an envelope for an anomaly of `kind`. */
export function immunePauseReason(kind: string): string {
  return `${IMMUNE_PAUSE}${kind} anomaly`;
}

/** Whether the envelope is paused because the Immune System asked for it. */
export function pausedByImmuneSystem(envelope: Envelope): boolean {
  return envelope.status === 'PAUSED' && envelope.status_reason?.startsWith(IMMUNE_PAUSE) === true;
}

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

/**
 * Moves an envelope in the current transaction from the status it was read in: the record, the
 * audit record, and the lifecycle publication and terminate or pause signal to send after commit. Callers
 * have checked that the move is allowed. Undefined when the envelope's status changed since it
 * was read (another transaction moved it): the caller reads it again and decides anew.
 */
export async function applyTransition(
  deps: { audit: AuditLog },
  tx: Repositories,
  envelope: Envelope,
  to: EnvelopeStatus,
  change: { reason: string | null; actor: Actor; now: Date; force?: boolean },
  effects: Effects,
): Promise<Envelope | undefined> {
  const at = change.now.toISOString();
  const tenant = envelope.tenant_id;
  const next = await tx.envelopes.transition(tenant, envelope.envelope_id, envelope.status, {
    status: to,
    status_reason: change.reason,
    updated_at: at,
    completed_at: isFinal(to) ? at : envelope.completed_at,
  });
  if (next === undefined) return undefined;
  await deps.audit.append(tx, tenant, {
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
      msgId: msgIds.envelope(tenant, next.envelope_id, to),
    });
  }
  // The proxies hold the calls of a paused envelope and refuse those of an ended one. The hold is
  // kept in a key-value bucket, so that a proxy that restarted, was cut off from NATS when it
  // changed, or forgot the envelope still knows it; the signals below are only the fast path.
  const resumed = envelope.status === 'PAUSED' && to === 'RUNNING';
  if (to === 'PAUSED' || resumed || isFinal(to)) {
    effects.changes.push({ kind: 'hold', tenant, envelopeId: next.envelope_id });
  }
  // A paused envelope's held calls are released when it runs again (an ending reaches them as a
  // terminate signal, which refuses the held calls instead).
  if (to === 'PAUSED' || resumed) {
    effects.pauses.push({
      tenant_id: tenant,
      envelope_id: next.envelope_id,
      paused: to === 'PAUSED',
      reason: change.reason,
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
