import type { DedupRepository } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import type { Sync } from './promised.ts';

/** Handled message ids under `[tenant, 'meta', '<scope>/<message id>']`. */
export class LmdbDedup implements Sync<DedupRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  markProcessed(tenant: string, scope: string, messageId: string): boolean {
    const meta = this.#layout.tenant(tenant, 'meta');
    const id = `${scope}/${messageId}`;
    if (this.#kv.get(meta, id) !== undefined) return false;
    this.#kv.put(meta, id, true);
    return true;
  }
}
