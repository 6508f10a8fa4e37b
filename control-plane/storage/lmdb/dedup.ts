import type { DedupRepository, RemovedSlice } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import type { Sync } from './promised.ts';

/**
 * Handled message ids under `[tenant, 'meta', '<scope>/<message id>']`, each holding the time it
 * was handled. Entries written before that time was kept hold `true`: retention keeps them.
 */
export class LmdbDedup implements Sync<DedupRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  markProcessed(tenant: string, scope: string, messageId: string, at: string): boolean {
    const meta = this.#layout.tenant(tenant, 'meta');
    const id = `${scope}/${messageId}`;
    if (this.#kv.get(meta, id) !== undefined) return false;
    this.#kv.put(meta, id, at);
    return true;
  }

  removeProcessedBefore(
    tenant: string,
    scope: string,
    before: string,
    after: string | null,
    limit: number,
  ): RemovedSlice {
    const cutoff = Date.parse(before);
    const meta = this.#layout.tenant(tenant, 'meta');
    const prefix = `${scope}/`;
    const seen: Array<{ id: string; old: boolean }> = [];
    for (const { id, value } of this.#kv.range<unknown>(meta, {
      prefix,
      after: after === null ? undefined : prefix + after,
    })) {
      if (seen.length >= limit) break;
      seen.push({ id: String(id), old: typeof value === 'string' && Date.parse(value) < cutoff });
    }
    for (const { id, old } of seen) if (old) this.#kv.remove(meta, id);
    const last = seen.at(-1);
    return {
      removed: seen.filter((s) => s.old).length,
      next: seen.length < limit || last === undefined ? null : last.id.slice(prefix.length),
    };
  }
}
