import type { Database, RootDatabase } from 'lmdb';
import { Space } from './kv.ts';

/** Spaces kept per kind: one per tenant; a process serving more tenants starts afresh. */
const TENANT_SPACES = 100_000;
/**
 * Nested spaces kept per kind: one per record they nest under (an envelope's event index), where
 * only the records a batch is writing need theirs kept, not every envelope ever seen.
 */
const NESTED_SPACES = 4_096;

/**
 * Record kinds kept per tenant, in database `tenant_data` under the key `[tenant, kind, id]`
 * (docs/storage.md lists what each holds). Every key starts with the tenant, so no range of one
 * tenant reaches another's records.
 */
export type TenantKind =
  | 'envelope'
  | 'envelope_time'
  | 'execution'
  | 'budget_envelope'
  | 'budget'
  | 'policy'
  | 'approval'
  | 'approval_status'
  | 'api_key'
  | 'audit'
  | 'event'
  | 'event_log'
  | 'envelope_event'
  | 'lease'
  | 'detection'
  | 'detection_id'
  | 'checkpoint'
  | 'checkpoint_summary'
  | 'checkpoint_time'
  | 'checkpoint_exec_time'
  | 'checkpoint_ref'
  | 'checkpoint_head'
  | 'execution_context'
  | 'meta';

/** What is looked up before a tenant is known, in database `global` under `[kind, id]`. */
export type GlobalKind = 'tenant' | 'api_key' | 'api_key_child' | 'webhook_secret' | 'meta';

/** A key of `tenant_data` or `global`. */
export type Key = Array<string | number>;

/** The databases of the control plane's LMDB environment and the key spaces within them. */
export class Layout {
  readonly data: Database<unknown, Key>;
  readonly global: Database<unknown, Key>;
  /** The spaces handed out so far, by kind and tenant: a batch addresses the same few over and over. */
  readonly #spaces = new Map<string, Map<string, Space>>();
  /** Nested spaces handed out so far, by kind and the record they nest under. */
  readonly #nested = new Map<TenantKind, Map<string, Space>>();

  constructor(root: RootDatabase) {
    this.data = root.openDB<unknown, Key>({ name: 'tenant_data' });
    this.global = root.openDB<unknown, Key>({ name: 'global' });
  }

  tenant(tenant: string, kind: TenantKind): Space {
    return this.#space(kind, tenant, () => new Space(this.data, [tenant, kind], `t\u0000${kind}\u0000${tenant}`));
  }

  /**
   * A space of its own per record `within` (`[tenant, kind, within]`): the ids under one record,
   * such as an execution's checkpoint versions, as a range no other record's ids can enter.
   */
  nested(tenant: string, kind: TenantKind, within: string): Space {
    // Kept like the others: a batch writes each envelope's event index over and over, and a space
    // encodes its prefix once. Found by the record's id and its tenant compared, rather than by a
    // name joined from the three on every call (a string built and hashed per event).
    let spaces = this.#nested.get(kind);
    if (spaces === undefined) this.#nested.set(kind, (spaces = new Map<string, Space>()));
    const space = spaces.get(within);
    if (space !== undefined && space.prefix[0] === tenant) return space;
    if (space === undefined && spaces.size >= NESTED_SPACES) spaces.clear();
    const made = new Space(this.data, [tenant, kind, within], `n\u0000${kind}\u0000${tenant}\u0000${within}`);
    spaces.set(within, made);
    return made;
  }

  globalKind(kind: GlobalKind): Space {
    return this.#space(`global ${kind}`, '', () => new Space(this.global, [kind], `g\u0000${kind}`));
  }

  /** A global space per record `within` (`[kind, within]`), such as the keys one key created. */
  globalNested(kind: GlobalKind, within: string): Space {
    return new Space(this.global, [kind, within], `gn\u0000${kind}\u0000${within}`);
  }

  /** Kept spaces of one group, at most `TENANT_SPACES`: past it the group starts afresh. */
  #space(group: string, key: string, make: () => Space): Space {
    let spaces = this.#spaces.get(group);
    if (spaces === undefined) this.#spaces.set(group, (spaces = new Map<string, Space>()));
    let space = spaces.get(key);
    if (space === undefined) {
      if (spaces.size >= TENANT_SPACES) spaces.clear();
      spaces.set(key, (space = make()));
    }
    return space;
  }
}
