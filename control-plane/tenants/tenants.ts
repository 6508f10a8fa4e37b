import { SvcError } from '../../core/errors/index.ts';
import { SYSTEM_TENANT, type Tenant } from '../../core/domain/index.ts';
import { taken } from '../storage/conflict.ts';
import { collectPages } from '../storage/paging.ts';
import type { Repositories, Storage } from '../storage/storage.ts';

/** The tenant registry. The system tenant always exists: platform administrators belong to it. */
export class Tenants {
  private readonly storage: Storage;

  constructor(storage: Storage) {
    this.storage = storage;
  }

  async exists(tenantId: string): Promise<boolean> {
    return tenantId === SYSTEM_TENANT || (await this.storage.read.tenants.exists(tenantId));
  }

  async get(tenantId: string): Promise<Tenant> {
    const tenant = await this.storage.read.tenants.get(tenantId);
    if (tenant === undefined)
      throw new SvcError('SVC-SYS-9006', `tenant ${tenantId} not found`, { tenant_id: tenantId });
    return tenant;
  }

  list(): Promise<Tenant[]> {
    return collectPages((page) => this.storage.read.tenants.list(page));
  }

  /** Stores a new tenant in the caller's transaction; refuses an id already taken. */
  async create(tx: Repositories, tenant: Tenant): Promise<Tenant> {
    if (tenant.tenant_id === SYSTEM_TENANT)
      throw taken('tenant_id', tenant.tenant_id, `tenant ${tenant.tenant_id} already exists`);
    await tx.tenants.create(tenant);
    return tenant;
  }
}
