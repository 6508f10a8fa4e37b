import type { ApiKeyRecord } from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { ApiKeyRepository, Page, PageRequest } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/**
 * Keys under their tenant, and in `global` the key id → tenant index authentication starts from
 * and, per key, the keys it created (`api_key_child`, `[kind, creator, key id]` → the key's tenant).
 */
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
    if (record.created_by !== undefined)
      this.#kv.put(this.#layout.globalNested('api_key_child', record.created_by), record.id, tenant);
    this.#kv.put(this.#layout.tenant(tenant, 'api_key'), record.id, record);
    this.#kv.put(index, record.id, tenant);
  }

  revoke(tenant: string, keyId: string, at: string): ApiKeyRecord | undefined {
    const record = this.get(tenant, keyId);
    if (record === undefined) return undefined;
    const revoked = this.#revokeOne(tenant, record, at);
    // Every key it created, and theirs, in any tenant (an administrator's key creates keys for others).
    const pending = [keyId];
    for (let creator = pending.pop(); creator !== undefined; creator = pending.pop()) {
      for (const { id, value } of this.#kv.range<string>(this.#layout.globalNested('api_key_child', creator))) {
        const child = this.get(value, String(id));
        if (child === undefined) continue;
        this.#revokeOne(value, child, at);
        pending.push(child.id);
      }
    }
    return revoked;
  }

  /** Writes are serial: nothing revokes the key before this transaction commits. */
  holdUnrevoked(keyId: string): boolean {
    const tenant = this.tenantOf(keyId);
    return tenant !== undefined && this.get(tenant, keyId)?.revoked_at === null;
  }

  /** A key revoked before keeps its time. */
  #revokeOne(tenant: string, record: ApiKeyRecord, at: string): ApiKeyRecord {
    if (record.revoked_at !== null) return record;
    const revoked = { ...record, revoked_at: at };
    this.#kv.put(this.#layout.tenant(tenant, 'api_key'), record.id, revoked);
    return revoked;
  }
}
