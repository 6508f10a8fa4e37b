import { createHash, randomUUID } from 'node:crypto';
import { makeWellFormed, type Actor, type AuditRecord } from '../../core/domain/index.ts';
import type { Store } from '../store/store.ts';
import { canonicalJson } from './canonical-json.ts';

export interface AuditEntry {
  actor: Actor;
  action: string;
  resource: { type: string; id: string };
  result: string;
  metadata?: Record<string, unknown>;
}

interface ChainHead {
  seq: number;
  hash: string;
}

const GENESIS = '0'.repeat(64);

function hashOf(record: Omit<AuditRecord, 'hash'>): string {
  return createHash('sha256').update(canonicalJson(record)).digest('hex');
}

export interface Verification {
  valid: boolean;
  checked: number;
  /** The first record whose hash or link does not match, when invalid. */
  first_invalid_seq: number | null;
  reason: string | null;
}

/**
 * The append-only audit trail, one hash chain per tenant: each record carries the hash of the
 * one before it, so altering, removing or reordering a record breaks verification from there on.
 * `append` must run inside the store transaction of the action it records, so an action and its
 * audit record land together.
 */
export class AuditLog {
  private readonly store: Store;
  private readonly clock: () => Date;

  constructor(store: Store, clock: () => Date = () => new Date()) {
    this.store = store;
    this.clock = clock;
  }

  append(tenant: string, entry: AuditEntry): AuditRecord {
    const head = this.store.get<ChainHead>(tenant, 'meta', 'audit_head') ?? { seq: 0, hash: GENESIS };
    // Hashed as storage will give it back: an unpaired surrogate would come back altered.
    const body: Omit<AuditRecord, 'hash'> = makeWellFormed(
      structuredClone({
        audit_id: randomUUID(),
        seq: head.seq + 1,
        timestamp: this.clock().toISOString(),
        tenant_id: tenant,
        actor: entry.actor,
        action: entry.action,
        resource: entry.resource,
        result: entry.result,
        metadata: entry.metadata ?? {},
        prev_hash: head.hash,
      }),
    );
    const record: AuditRecord = { ...body, hash: hashOf(body) };
    this.store.put(tenant, 'audit', record.seq, record);
    this.store.put(tenant, 'meta', 'audit_head', { seq: record.seq, hash: record.hash } satisfies ChainHead);
    return record;
  }

  /** Newest first, filtered. */
  query(
    tenant: string,
    filter: { action?: string; resource_type?: string; actor_id?: string; limit: number },
  ): AuditRecord[] {
    const out: AuditRecord[] = [];
    for (const record of this.store.listNumeric<AuditRecord>(tenant, 'audit', { reverse: true })) {
      if (filter.action !== undefined && record.action !== filter.action) continue;
      if (filter.resource_type !== undefined && record.resource.type !== filter.resource_type) continue;
      if (filter.actor_id !== undefined && record.actor.id !== filter.actor_id) continue;
      out.push(record);
      if (out.length >= filter.limit) break;
    }
    return out;
  }

  verify(tenant: string): Verification {
    let prev = GENESIS;
    let expectedSeq = 1;
    let checked = 0;
    for (const record of this.store.listNumeric<AuditRecord>(tenant, 'audit')) {
      const { hash, ...body } = record;
      const fail = (reason: string): Verification => ({ valid: false, checked, first_invalid_seq: record.seq, reason });
      if (record.seq !== expectedSeq) return fail(`sequence gap: expected ${expectedSeq}`);
      if (record.prev_hash !== prev) return fail('link to the previous record does not match');
      if (hashOf(body) !== hash) return fail('record content does not match its hash');
      prev = hash;
      expectedSeq += 1;
      checked += 1;
    }
    const head = this.store.get<ChainHead>(tenant, 'meta', 'audit_head');
    if (head !== undefined && (head.seq !== checked || head.hash !== prev)) {
      return {
        valid: false,
        checked,
        first_invalid_seq: checked + 1,
        reason: 'records after the last one found are missing',
      };
    }
    return { valid: true, checked, first_invalid_seq: null, reason: null };
  }
}
