/**
 * Values by tenant, then by id: a batch looks its envelopes and budgets up several times per event,
 * where a key joined from both (a new string each time, hashed whole) cost four times a lookup of
 * the tenant's map (mostly the last one asked for) and of the id in it.
 */
export class ByTenant<V> {
  readonly #tenants = new Map<string, Map<string, V>>();
  #lastTenant: string | undefined;
  #last: Map<string, V> | undefined;

  get(tenant: string, id: string): V | undefined {
    return this.#of(tenant)?.get(id);
  }

  has(tenant: string, id: string): boolean {
    return this.#of(tenant)?.has(id) ?? false;
  }

  set(tenant: string, id: string, value: V): void {
    let ids = this.#of(tenant);
    if (ids === undefined) {
      this.#tenants.set(tenant, (ids = new Map<string, V>()));
      this.#lastTenant = tenant;
      this.#last = ids;
    }
    ids.set(id, value);
  }

  delete(tenant: string, id: string): void {
    this.#of(tenant)?.delete(id);
  }

  clear(): void {
    this.#tenants.clear();
    this.#lastTenant = undefined;
    this.#last = undefined;
  }

  /** Every value, a tenant's in the order they were first set. */
  *values(): Generator<V> {
    for (const ids of this.#tenants.values()) yield* ids.values();
  }

  #of(tenant: string): Map<string, V> | undefined {
    if (tenant === this.#lastTenant) return this.#last;
    const ids = this.#tenants.get(tenant);
    if (ids !== undefined) {
      this.#lastTenant = tenant;
      this.#last = ids;
    }
    return ids;
  }
}
