import { SvcError } from '../../core/errors/index.ts';
import { SYSTEM_TENANT, type Tenant } from '../../core/domain/index.ts';
import type { Store } from '../store/store.ts';

/** The tenant registry. The system tenant always exists: platform administrators belong to it. */
export class Tenants {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  exists(tenantId: string): boolean {
    return tenantId === SYSTEM_TENANT || this.store.getGlobal<Tenant>('tenant', tenantId) !== undefined;
  }

  get(tenantId: string): Tenant {
    const tenant = this.store.getGlobal<Tenant>('tenant', tenantId);
    if (tenant === undefined)
      throw new SvcError('SVC-SYS-9006', `tenant ${tenantId} not found`, { tenant_id: tenantId });
    return tenant;
  }

  list(): Tenant[] {
    return [...this.store.listGlobal<Tenant>('tenant')];
  }

  /** Stages a new tenant; refuses an id already taken. */
  create(tenant: Tenant): Tenant {
    if (this.exists(tenant.tenant_id)) {
      throw new SvcError('SVC-SYS-9008', `tenant ${tenant.tenant_id} already exists`, { tenant_id: tenant.tenant_id }, [
        { field: 'tenant_id', description: 'already exists' },
      ]);
    }
    this.store.putGlobal(tenant, 'tenant', tenant.tenant_id);
    return tenant;
  }
}
