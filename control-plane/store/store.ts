import { open, type Database, type RootDatabase } from 'lmdb';
import type { Kind } from './kinds.ts';

type Key = [string, Kind, string | number] | [string, Kind, string, string];

/**
 * The control plane's durable state in LMDB. Every read and write names the tenant, and every
 * key starts with it, so no code path can reach across tenants (row-level security by key).
 * Writes that belong together go through `transaction`, so nothing is ever half-written.
 */
export class Store {
  readonly root: RootDatabase;
  private readonly data: Database<unknown, Key>;
  /** Lookups that must happen before the tenant is known: API key id → tenant, tenant registry. */
  private readonly global: Database<unknown, string[]>;

  constructor(path: string) {
    this.root = open({ path, maxDbs: 8, compression: false });
    this.data = this.root.openDB<unknown, Key>({ name: 'tenant_data' });
    this.global = this.root.openDB<unknown, string[]>({ name: 'global' });
  }

  get<T>(tenant: string, kind: Kind, id: string | number): T | undefined {
    return this.data.get([tenant, kind, id]) as T | undefined;
  }

  /** Stages a write; call inside `transaction` (or it commits on its own, asynchronously). */
  put(tenant: string, kind: Kind, id: string | number, value: unknown): void {
    void this.data.put([tenant, kind, id], value);
  }

  remove(tenant: string, kind: Kind, id: string | number): void {
    void this.data.remove([tenant, kind, id]);
  }

  /** Records of one kind of one tenant in key order; `reverse` starts from the newest key. */
  *list<T>(tenant: string, kind: Kind, options: { reverse?: boolean; limit?: number; prefix?: string } = {}): Generator<T> {
    const low: Key = [tenant, kind, options.prefix ?? ''];
    const high = [tenant, kind, options.prefix === undefined ? '\uffff' : options.prefix + '\uffff'] as Key;
    const range = this.data.getRange(options.reverse ? { start: high, end: low, reverse: true, limit: options.limit } : { start: low, end: high, limit: options.limit });
    for (const { value } of range) yield value as T;
  }

  /** Numeric-keyed records (audit sequence) in order. */
  *listNumeric<T>(tenant: string, kind: Kind, options: { reverse?: boolean; limit?: number } = {}): Generator<T> {
    const low: Key = [tenant, kind, 0];
    const high: Key = [tenant, kind, Number.MAX_SAFE_INTEGER];
    const range = this.data.getRange(options.reverse ? { start: high, end: low, reverse: true, limit: options.limit } : { start: low, end: high, limit: options.limit });
    for (const { value } of range) yield value as T;
  }

  getGlobal<T>(...key: string[]): T | undefined {
    return this.global.get(key) as T | undefined;
  }

  putGlobal(value: unknown, ...key: string[]): void {
    void this.global.put(key, value);
  }

  *listGlobal<T>(prefix: string): Generator<T> {
    for (const { value } of this.global.getRange({ start: [prefix], end: [prefix, '\uffff'] })) yield value as T;
  }

  /**
   * Runs `fn` as one LMDB write transaction: all of its puts land together or not at all, and
   * reads inside it see its own writes. Synchronous on purpose: it keeps the critical section
   * free of awaits, so concurrent requests cannot interleave inside it.
   */
  transaction<T>(fn: () => T): T {
    return this.root.transactionSync(fn);
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
