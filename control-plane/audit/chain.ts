import { hash } from 'node:crypto';
import type { AuditRecord } from '../../core/domain/index.ts';
import type { AuditHead } from '../storage/records.ts';
import { canonicalJsonBytes } from './canonical-json.ts';

/** The link the first record of every chain points back to. */
export const GENESIS = '0'.repeat(64);

/** An audit record before it has its place in the chain (what a caller appends). */
export type AuditDraft = Omit<AuditRecord, 'seq' | 'prev_hash' | 'hash' | 'tenant_id'>;

export function auditHash(record: Omit<AuditRecord, 'hash'>): string {
  // One-shot: every request appends two records, and a Hash object apiece cost more than the digest.
  return hash('sha256', canonicalJsonBytes(record), 'hex');
}

/**
 * The draft as the next record after `head` (none: the first of the tenant): its sequence number,
 * the hash of the record before it, and its own hash over all of that. Every storage backend
 * seals with this, so that one verification holds for all of them.
 */
export function sealAuditRecord(tenant: string, head: AuditHead | undefined, draft: AuditDraft): AuditRecord {
  const body: Omit<AuditRecord, 'hash'> = {
    audit_id: draft.audit_id,
    seq: (head?.seq ?? 0) + 1,
    timestamp: draft.timestamp,
    tenant_id: tenant,
    actor: draft.actor,
    action: draft.action,
    resource: draft.resource,
    result: draft.result,
    metadata: draft.metadata,
    prev_hash: head?.hash ?? GENESIS,
  };
  return { ...body, hash: auditHash(body) };
}
