import type { Policy } from '../../../core/policy/index.ts';
import { taken } from '../conflict.ts';
import type { Page, PageRequest, PolicyRepository } from '../storage.ts';
import type { KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

export class LmdbPolicies implements Sync<PolicyRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, policyId: string): Policy | undefined {
    return this.#kv.get<Policy>(this.#layout.tenant(tenant, 'policy'), policyId);
  }

  list(tenant: string, request?: PageRequest): Page<Policy> {
    const { size, after } = pageStart(request);
    return pageOf(this.#kv.range<Policy>(this.#layout.tenant(tenant, 'policy'), { after }), size);
  }

  version(tenant: string): number {
    return this.#kv.get<number>(this.#layout.tenant(tenant, 'meta'), 'ruleset_version') ?? 0;
  }

  insert(tenant: string, policy: Policy): void {
    const space = this.#layout.tenant(tenant, 'policy');
    if (this.#kv.get(space, policy.policy_id) !== undefined)
      throw taken('policy_id', policy.policy_id, `policy ${policy.policy_id} already exists`);
    this.#kv.put(space, policy.policy_id, policy);
  }

  bumpVersion(tenant: string): number {
    const next = this.version(tenant) + 1;
    this.#kv.put(this.#layout.tenant(tenant, 'meta'), 'ruleset_version', next);
    return next;
  }

  replace(tenant: string, policy: Policy, expectedVersion: number): boolean {
    const space = this.#layout.tenant(tenant, 'policy');
    if (this.#kv.get<Policy>(space, policy.policy_id)?.version !== expectedVersion) return false;
    this.#kv.put(space, policy.policy_id, policy);
    return true;
  }

  remove(tenant: string, policyId: string): boolean {
    const space = this.#layout.tenant(tenant, 'policy');
    if (this.#kv.get(space, policyId) === undefined) return false;
    this.#kv.remove(space, policyId);
    return true;
  }
}
