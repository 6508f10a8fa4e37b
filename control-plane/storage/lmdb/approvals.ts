import type { Approval, ApprovalStatus } from '../../../core/policy/index.ts';
import { taken } from '../conflict.ts';
import type { ApprovalDecisionFields, ApprovalListFilter, ApprovalRepository, Page, PageRequest } from '../storage.ts';
import type { Entry, KvView, Space } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/**
 * Approvals under `[tenant, 'approval', id]`, with each status's ids under `[tenant,
 * 'approval_status', status, id]`: a list of one status (the pending ones) reads only those, however
 * many were decided before them.
 */
export class LmdbApprovals implements Sync<ApprovalRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, approvalId: string): Approval | undefined {
    return this.#kv.get<Approval>(this.#layout.tenant(tenant, 'approval'), approvalId);
  }

  list(tenant: string, filter: ApprovalListFilter, request?: PageRequest): Page<Approval> {
    const { size, after } = pageStart(request);
    if (filter.status === undefined)
      return pageOf(this.#kv.range<Approval>(this.#layout.tenant(tenant, 'approval'), { after }), size);
    const space = this.#layout.tenant(tenant, 'approval');
    const kv = this.#kv;
    function* approvals(ids: Iterable<Entry<true>>): Generator<Entry<Approval>> {
      for (const { id } of ids) {
        const approval = kv.get<Approval>(space, id);
        if (approval !== undefined) yield { id, value: approval };
      }
    }
    return pageOf(approvals(kv.range<true>(this.#byStatus(tenant, filter.status), { after })), size);
  }

  insert(tenant: string, approval: Approval): void {
    const space = this.#layout.tenant(tenant, 'approval');
    if (this.#kv.get(space, approval.approval_id) !== undefined)
      throw taken('approval_id', approval.approval_id, `approval ${approval.approval_id} already exists`);
    this.#kv.put(space, approval.approval_id, approval);
    this.#kv.put(this.#byStatus(tenant, approval.status), approval.approval_id, true);
  }

  #byStatus(tenant: string, status: ApprovalStatus): Space {
    return this.#layout.nested(tenant, 'approval_status', status);
  }

  decide(tenant: string, approvalId: string, decision: ApprovalDecisionFields): Approval | undefined {
    const space = this.#layout.tenant(tenant, 'approval');
    const stored = this.#kv.get<Approval>(space, approvalId);
    if (stored === undefined || stored.status !== 'PENDING') return undefined;
    const { review_note: note, ...fields } = decision;
    const decided: Approval = { ...stored, ...fields, ...(note === undefined ? {} : { review_note: note }) };
    this.#kv.put(space, approvalId, decided);
    this.#kv.remove(this.#byStatus(tenant, stored.status), approvalId);
    this.#kv.put(this.#byStatus(tenant, decided.status), approvalId, true);
    return decided;
  }
}
