import { SYSTEM_TENANT } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { Storage } from '../storage/storage.ts';
import { featuresOf, switchedOff, type Feature } from './features.ts';

export interface TenantFeaturesDeps {
  storage: Storage;
  audit: AuditLog;
  /** The service's features, from its configuration. */
  service: readonly Feature[];
}

/**
 * The service's features as each tenant has them. A tenant's admin may switch a switchable feature
 * off for the tenant and on again; every replica reads the switch from the store, and the change
 * lands with its audit record.
 */
export class TenantFeatures {
  readonly #deps: TenantFeaturesDeps;

  constructor(deps: TenantFeaturesDeps) {
    this.#deps = deps;
  }

  async list(tenantId: string): Promise<Feature[]> {
    const tenant = await this.#deps.storage.read.tenants.get(tenantId);
    return featuresOf(this.#deps.service, tenant ?? {});
  }

  async get(tenantId: string, name: string): Promise<Feature> {
    const feature = (await this.list(tenantId)).find((f) => f.name === name);
    if (feature === undefined) throw this.#unknown(name);
    return feature;
  }

  /**
   * Switches a feature for the caller's tenant. Asking for the state it is in changes nothing;
   * a feature the service's configuration decides answers SVC-SYS-9011 when asked to change.
   */
  async switch(caller: Caller, name: string, enabled: boolean): Promise<Feature> {
    const current = await this.get(caller.tenant, name);
    if (current.enabled === enabled) return current;
    if (!current.switchable)
      throw new SvcError(
        'SVC-SYS-9011',
        `feature ${name} is ${current.enabled ? 'on' : 'off'} by this service's configuration ` +
          `(${current.settings.join(', ')}), read at start; it is not switched at run time`,
        { feature: name, field: 'enabled', settings: current.settings },
      );
    if (caller.tenant === SYSTEM_TENANT)
      throw new SvcError('SVC-SYS-9002', 'features are switched per tenant: name the tenant with X-Tenant-ID', {
        field: 'X-Tenant-ID',
      });
    const { storage, audit } = this.#deps;
    await storage.withTransaction(async (tx) => {
      const stored = await tx.tenants.getForUpdate(caller.tenant);
      if (stored === undefined)
        throw new SvcError('SVC-SYS-9006', `tenant ${caller.tenant} not found`, { tenant_id: caller.tenant });
      // A concurrent request made the same change first.
      if (switchedOff(stored, name) !== enabled) return;
      const others = (stored.disabled_features ?? []).filter((n) => n !== name);
      const next = { ...stored, disabled_features: enabled ? others : [...others, name] };
      await tx.tenants.replace(next);
      await audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'feature.update',
        resource: { type: 'feature', id: name },
        result: 'updated',
        metadata: { enabled },
      });
    });
    return { ...current, enabled };
  }

  #unknown(name: string): SvcError {
    return new SvcError(
      'SVC-SYS-9006',
      `no feature ${name}; known: ${this.#deps.service.map((f) => f.name).join(', ')}`,
      { feature: name },
    );
  }
}
