import type { Database, RootDatabase } from 'lmdb';
import type { Space } from './kv.ts';

/**
 * Record kinds kept per tenant, in database `tenant_data` under the key `[tenant, kind, id]`
 * (docs/storage.md lists what each holds). Every key starts with the tenant, so no range of one
 * tenant reaches another's records.
 */
export type TenantKind =
  | 'envelope'
  | 'execution'
  | 'budget_envelope'
  | 'budget'
  | 'policy'
  | 'approval'
  | 'api_key'
  | 'audit'
  | 'event'
  | 'event_log'
  | 'envelope_event'
  | 'lease'
  | 'meta';

/** What is looked up before a tenant is known, in database `global` under `[kind, id]`. */
export type GlobalKind = 'tenant' | 'api_key' | 'webhook_secret' | 'meta';

type Key = Array<string | number>;

/** The databases of the control plane's LMDB environment and the key spaces within them. */
export class Layout {
  readonly data: Database<unknown, Key>;
  readonly global: Database<unknown, Key>;

  constructor(root: RootDatabase) {
    this.data = root.openDB<unknown, Key>({ name: 'tenant_data' });
    this.global = root.openDB<unknown, Key>({ name: 'global' });
  }

  tenant(tenant: string, kind: TenantKind): Space {
    return { db: this.data, prefix: [tenant, kind], name: JSON.stringify(['t', tenant, kind]) };
  }

  globalKind(kind: GlobalKind): Space {
    return { db: this.global, prefix: [kind], name: JSON.stringify(['g', kind]) };
  }
}
