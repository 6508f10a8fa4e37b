import { randomUUID } from 'node:crypto';
import { wellFormedCopy, type Actor, type AuditRecord } from '../../core/domain/index.ts';
import { collectUpTo } from '../storage/paging.ts';
import type { Page, PageRequest, Repositories, Storage } from '../storage/storage.ts';
import { auditHash, GENESIS } from './chain.ts';

export interface AuditEntry {
  actor: Actor;
  action: string;
  resource: { type: string; id: string };
  result: string;
  metadata?: Record<string, unknown>;
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
 * `append` runs inside the transaction of the action it records, so an action and its audit
 * record land together; the storage serialises the appends of a tenant (control-plane/audit/chain.ts).
 */
export class AuditLog {
  private readonly storage: Storage;
  private readonly clock: () => Date;

  constructor(storage: Storage, clock: () => Date = () => new Date()) {
    this.storage = storage;
    this.clock = clock;
  }

  append(tx: Repositories, tenant: string, entry: AuditEntry): Promise<void> {
    // Hashed as storage will give it back (an unpaired surrogate would come back altered), and a
    // copy: the record is encoded at its group's commit, after the caller may have changed its parts.
    return tx.audit.append(
      tenant,
      wellFormedCopy({
        audit_id: randomUUID(),
        timestamp: this.clock().toISOString(),
        actor: entry.actor,
        action: entry.action,
        resource: entry.resource,
        result: entry.result,
        metadata: entry.metadata ?? {},
      }),
    );
  }

  /**
   * Newest first, filtered, up to `limit`: ended early (with the token to go on) where storage ended
   * a page at its bound on the records one page reads, so a filter that matches little does not
   * walk the whole chain for one request.
   */
  query(
    tenant: string,
    filter: { action?: string; resource_type?: string; actor_id?: string; limit: number },
  ): Promise<Page<AuditRecord>> {
    return collectUpTo(this.pages(tenant, filter), filter.limit);
  }

  /** The pages of the same query, newest first, for a list answered a page at a time. */
  pages(
    tenant: string,
    filter: { action?: string | undefined; resource_type?: string | undefined; actor_id?: string | undefined },
  ): (page: PageRequest) => Promise<Page<AuditRecord>> {
    const { action, resource_type: resourceType, actor_id: actorId } = filter;
    return (page) => this.storage.read.audit.list(tenant, { order: 'newest', action, resourceType, actorId }, page);
  }

  /**
   * Walks the tenant's chain from its first record to its head, checking every link and hash, and
   * that the last record is the head. The head is read first: the pages are read one after another,
   * not in one snapshot, so records appended meanwhile lie past that head and are left to the next
   * verification, while a head read last could be ahead of the records walked.
   */
  async verify(tenant: string): Promise<Verification> {
    const head = (await this.storage.read.audit.head(tenant)) ?? { seq: 0, hash: GENESIS };
    let prev = GENESIS;
    let checked = 0;
    let pageToken: string | null = null;
    do {
      const page = await this.storage.read.audit.list(tenant, { order: 'oldest' }, { pageSize: 100, pageToken });
      for (const record of page.items) {
        if (checked === head.seq) break;
        const { hash, ...body } = record;
        const fail = (reason: string): Verification => ({
          valid: false,
          checked,
          first_invalid_seq: record.seq,
          reason,
        });
        if (record.seq !== checked + 1) return fail(`sequence gap: expected ${checked + 1}`);
        if (record.prev_hash !== prev) return fail('link to the previous record does not match');
        if (auditHash(body) !== hash) return fail('record content does not match its hash');
        prev = hash;
        checked += 1;
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== null && checked < head.seq);
    if (checked < head.seq)
      return { valid: false, checked, first_invalid_seq: checked + 1, reason: 'records up to the head are missing' };
    if (prev !== head.hash)
      return { valid: false, checked, first_invalid_seq: head.seq, reason: 'the last record is not the head' };
    return { valid: true, checked, first_invalid_seq: null, reason: null };
  }
}
