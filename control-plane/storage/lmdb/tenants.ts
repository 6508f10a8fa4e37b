import type { Tenant } from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { WebhookSecretRecord } from '../records.ts';
import type { Page, PageRequest, TenantRepository } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

export class LmdbTenants implements Sync<TenantRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenantId: string): Tenant | undefined {
    return this.#kv.get<Tenant>(this.#layout.globalKind('tenant'), tenantId);
  }

  exists(tenantId: string): boolean {
    return this.#kv.has(this.#layout.globalKind('tenant'), tenantId);
  }

  list(request?: PageRequest): Page<Tenant> {
    const { size, after } = pageStart(request);
    return pageOf(this.#kv.range<Tenant>(this.#layout.globalKind('tenant'), { after }), size);
  }

  webhookSecret(tenantId: string): WebhookSecretRecord | undefined {
    return this.#kv.get<WebhookSecretRecord>(this.#layout.globalKind('webhook_secret'), tenantId);
  }

  create(tenant: Tenant): void {
    const space = this.#layout.globalKind('tenant');
    if (this.#kv.get(space, tenant.tenant_id) !== undefined)
      throw taken('tenant_id', tenant.tenant_id, `tenant ${tenant.tenant_id} already exists`);
    this.#kv.put(space, tenant.tenant_id, tenant);
  }

  // One writer at a time: what this transaction read stays as read until it commits.
  getForUpdate(tenantId: string): Tenant | undefined {
    return this.get(tenantId);
  }

  replace(tenant: Tenant): void {
    this.#kv.put(this.#layout.globalKind('tenant'), tenant.tenant_id, tenant);
  }

  issueWebhookSecret(tenantId: string, record: WebhookSecretRecord): WebhookSecretRecord {
    const existing = this.webhookSecret(tenantId);
    if (existing !== undefined) return existing;
    this.#kv.put(this.#layout.globalKind('webhook_secret'), tenantId, record);
    return record;
  }

  putWebhookSecret(tenantId: string, record: WebhookSecretRecord): void {
    this.#kv.put(this.#layout.globalKind('webhook_secret'), tenantId, record);
  }
}
