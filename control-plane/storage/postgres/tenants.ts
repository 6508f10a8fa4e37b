import type { Tenant } from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { WebhookSecretRecord } from '../records.ts';
import type { Page, PageRequest, TenantRepository } from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sql } from './sql.ts';

interface Row {
  tenant_id: string;
  doc: Tenant;
}

export class PgTenants implements TenantRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenantId: string): Promise<Tenant | undefined> {
    const { rows } = await this.#sql.query<Row>('SELECT doc FROM tenants WHERE tenant_id = $1', [tenantId]);
    return rows[0]?.doc;
  }

  async exists(tenantId: string): Promise<boolean> {
    const { rows } = await this.#sql.query('SELECT 1 FROM tenants WHERE tenant_id = $1', [tenantId]);
    return rows.length > 0;
  }

  async list(request?: PageRequest): Promise<Page<Tenant>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      'SELECT tenant_id, doc FROM tenants WHERE ($1::text IS NULL OR tenant_id > $1) ORDER BY tenant_id LIMIT $2',
      [after, size + 1],
    );
    return pageOf(
      rows,
      size,
      (r) => r.tenant_id,
      (r) => r.doc,
    );
  }

  async webhookSecret(tenantId: string): Promise<WebhookSecretRecord | undefined> {
    const { rows } = await this.#sql.query<{ doc: WebhookSecretRecord }>(
      'SELECT doc FROM webhook_secrets WHERE tenant_id = $1',
      [tenantId],
    );
    return rows[0]?.doc;
  }

  async create(tenant: Tenant): Promise<void> {
    const { rowCount } = await this.#sql.query(
      'INSERT INTO tenants (tenant_id, doc) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      [tenant.tenant_id, JSON.stringify(tenant)],
    );
    if (rowCount === 0) throw taken('tenant_id', tenant.tenant_id, `tenant ${tenant.tenant_id} already exists`);
  }

  async getForUpdate(tenantId: string): Promise<Tenant | undefined> {
    const { rows } = await this.#sql.query<Row>('SELECT doc FROM tenants WHERE tenant_id = $1 FOR UPDATE', [tenantId]);
    return rows[0]?.doc;
  }

  async replace(tenant: Tenant): Promise<void> {
    await this.#sql.query('UPDATE tenants SET doc = $2 WHERE tenant_id = $1', [
      tenant.tenant_id,
      JSON.stringify(tenant),
    ]);
  }

  async issueWebhookSecret(tenantId: string, record: WebhookSecretRecord): Promise<WebhookSecretRecord> {
    // A concurrent first issue waits for the other to commit, then reads the secret it stored.
    await this.#sql.query('INSERT INTO webhook_secrets (tenant_id, doc) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
      tenantId,
      JSON.stringify(record),
    ]);
    return (await this.webhookSecret(tenantId)) ?? record;
  }

  async putWebhookSecret(tenantId: string, record: WebhookSecretRecord): Promise<void> {
    await this.#sql.query(
      'INSERT INTO webhook_secrets (tenant_id, doc) VALUES ($1, $2) ON CONFLICT (tenant_id) DO UPDATE SET doc = excluded.doc',
      [tenantId, JSON.stringify(record)],
    );
  }
}
