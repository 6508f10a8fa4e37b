import type { AuditRecord } from '../../../core/domain/index.ts';
import { sealAuditRecord, type AuditDraft } from '../../audit/chain.ts';
import type { AuditHead } from '../records.ts';
import type { AuditFilter, AuditRepository, Page, PageRequest } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOfScanned, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/** Records under `[tenant, 'audit', seq]`, the chain's head under `[tenant, 'meta', 'audit_head']`. */
export class LmdbAudit implements Sync<AuditRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  list(tenant: string, filter: AuditFilter, request?: PageRequest): Page<AuditRecord> {
    const { size, after } = pageStart(request, 'number');
    const records = this.#kv.range<AuditRecord>(this.#layout.tenant(tenant, 'audit'), {
      numeric: true,
      reverse: filter.order === 'newest',
      after,
    });
    return pageOfScanned(
      records,
      (r) =>
        (filter.action === undefined || r.action === filter.action) &&
        (filter.resourceType === undefined || r.resource.type === filter.resourceType) &&
        (filter.actorId === undefined || r.actor.id === filter.actorId),
      size,
    );
  }

  head(tenant: string): AuditHead | undefined {
    return this.#kv.get<AuditHead>(this.#layout.tenant(tenant, 'meta'), 'audit_head');
  }

  /** Serialised by the one writer at a time. */
  append(tenant: string, draft: AuditDraft): void {
    const meta = this.#layout.tenant(tenant, 'meta');
    const record = sealAuditRecord(tenant, this.#kv.get<AuditHead>(meta, 'audit_head'), draft);
    this.#kv.put(this.#layout.tenant(tenant, 'audit'), record.seq, record);
    this.#kv.put(meta, 'audit_head', { seq: record.seq, hash: record.hash } satisfies AuditHead);
  }
}
