import type { ExecutionContext } from '../../checkpoints/checkpoint.ts';
import type { ExecutionContextRepository, Page, PageRequest } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/** Execution contexts under `[tenant, 'execution_context', execution_id]`. */
export class LmdbExecutionContexts implements Sync<ExecutionContextRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, executionId: string): ExecutionContext | undefined {
    return this.#kv.get<ExecutionContext>(this.#layout.tenant(tenant, 'execution_context'), executionId);
  }

  list(tenant: string, request?: PageRequest): Page<ExecutionContext> {
    const { size, after } = pageStart(request);
    return pageOf(this.#kv.range<ExecutionContext>(this.#layout.tenant(tenant, 'execution_context'), { after }), size);
  }

  /** Transactions run one at a time here: nothing is admitted between the count and the commit. */
  admit(tenant: string, executionId: string, max: number): boolean {
    const space = this.#layout.tenant(tenant, 'execution_context');
    return this.#kv.get(space, executionId) !== undefined || this.#kv.count(space) < max;
  }

  removeUpdatedBefore(tenant: string, before: string, limit: number): number {
    const space = this.#layout.tenant(tenant, 'execution_context');
    const doomed: string[] = [];
    for (const { id, value } of this.#kv.range<ExecutionContext>(space)) {
      if (doomed.length === limit) break;
      if (value.updated_at !== null && value.updated_at < before) doomed.push(String(id));
    }
    for (const id of doomed) this.#kv.remove(space, id);
    return doomed.length;
  }

  put(tenant: string, context: ExecutionContext, expectedVersion: number): boolean {
    // Transactions run one at a time here, so the read and the write cannot interleave.
    if ((this.get(tenant, context.execution_id)?.version ?? 0) !== expectedVersion) return false;
    this.#kv.put(this.#layout.tenant(tenant, 'execution_context'), context.execution_id, context);
    return true;
  }
}
