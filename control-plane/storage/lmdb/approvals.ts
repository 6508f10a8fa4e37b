import type { Approval } from '../../../core/policy/index.ts';
import { taken } from '../conflict.ts';
import type { ApprovalDecisionFields, ApprovalRepository, Page, PageRequest } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

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

  list(tenant: string, request?: PageRequest): Page<Approval> {
    const { size, after } = pageStart(request);
    return pageOf(this.#kv.range<Approval>(this.#layout.tenant(tenant, 'approval'), { after }), size);
  }

  insert(tenant: string, approval: Approval): void {
    const space = this.#layout.tenant(tenant, 'approval');
    if (this.#kv.get(space, approval.approval_id) !== undefined)
      throw taken('approval_id', approval.approval_id, `approval ${approval.approval_id} already exists`);
    this.#kv.put(space, approval.approval_id, approval);
  }

  decide(tenant: string, approvalId: string, decision: ApprovalDecisionFields): Approval | undefined {
    const space = this.#layout.tenant(tenant, 'approval');
    const stored = this.#kv.get<Approval>(space, approvalId);
    if (stored === undefined || stored.status !== 'PENDING') return undefined;
    const { review_note: note, ...fields } = decision;
    const decided: Approval = { ...stored, ...fields, ...(note === undefined ? {} : { review_note: note }) };
    this.#kv.put(space, approvalId, decided);
    return decided;
  }
}
