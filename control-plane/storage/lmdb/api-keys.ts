import type { ApiKeyRecord } from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { ApiKeyRepository, Page, PageRequest } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/** Keys under their tenant, and in `global` the key id → tenant index authentication starts from. */
export class LmdbApiKeys implements Sync<ApiKeyRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, keyId: string): ApiKeyRecord | undefined {
    return this.#kv.get<ApiKeyRecord>(this.#layout.tenant(tenant, 'api_key'), keyId);
  }

  list(tenant: string, request?: PageRequest): Page<ApiKeyRecord> {
    const { size, after } = pageStart(request);
    return pageOf(this.#kv.range<ApiKeyRecord>(this.#layout.tenant(tenant, 'api_key'), { after }), size);
  }

  tenantOf(keyId: string): string | undefined {
    return this.#kv.get<string>(this.#layout.globalKind('api_key'), keyId);
  }

  insert(tenant: string, record: ApiKeyRecord): void {
    const index = this.#layout.globalKind('api_key');
    if (this.#kv.get(index, record.id) !== undefined)
      throw taken('id', record.id, `API key ${record.id} already exists`);
    this.#kv.put(this.#layout.tenant(tenant, 'api_key'), record.id, record);
    this.#kv.put(index, record.id, tenant);
  }

  revoke(tenant: string, keyId: string, at: string): ApiKeyRecord | undefined {
    const space = this.#layout.tenant(tenant, 'api_key');
    const record = this.#kv.get<ApiKeyRecord>(space, keyId);
    if (record === undefined || record.revoked_at !== null) return record;
    const revoked = { ...record, revoked_at: at };
    this.#kv.put(space, keyId, revoked);
    return revoked;
  }
}
