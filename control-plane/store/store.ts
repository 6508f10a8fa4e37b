import { open, type Database, type RootDatabase } from 'lmdb';
import type { Kind } from './kinds.ts';

type Key = [string, Kind, string | number] | [string, Kind, string, string];

/**
 * The end of a key range: keys are UTF-8, where every character outside the Basic Multilingual
 * Plane sorts after U+FFFF, so only U+10FFFF bounds every id (one starting with an emoji included).
 */
const END = '\u{10ffff}';

/** Records rewritten many times within one batch: written back once, when the batch commits. */
const WRITE_BACK: ReadonlySet<Kind> = new Set(['envelope', 'budget', 'meta']);

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
  /** During `batch`: the latest value of each write-back record touched, by key. */
  private pending: Map<string, { key: Key; value: unknown }> | null = null;
  /** A write outside a transaction commits later; its failure is reported here, never left unhandled. */
  private readonly failed: (error: unknown) => void;

  constructor(path: string, onWriteFailure?: (error: unknown) => void) {
    this.failed =
      onWriteFailure ??
      ((error) => {
        throw error;
      });
    this.root = open({ path, maxDbs: 8, compression: false });
    this.data = this.root.openDB<unknown, Key>({ name: 'tenant_data' });
    this.global = this.root.openDB<unknown, string[]>({ name: 'global' });
  }

  get<T>(tenant: string, kind: Kind, id: string | number): T | undefined {
    const key: Key = [tenant, kind, id];
    const staged = this.pending?.get(JSON.stringify(key));
    return (staged !== undefined ? staged.value : this.data.get(key)) as T | undefined;
  }

  /** Stages a write; call inside `transaction` (or it commits on its own, asynchronously). */
  put(tenant: string, kind: Kind, id: string | number, value: unknown): void {
    const key: Key = [tenant, kind, id];
    if (this.pending !== null && WRITE_BACK.has(kind)) this.pending.set(JSON.stringify(key), { key, value });
    else this.data.put(key, value).catch(this.failed);
  }

  remove(tenant: string, kind: Kind, id: string | number): void {
    this.data.remove([tenant, kind, id]).catch(this.failed);
  }

  /** Records of one kind of one tenant in key order; `reverse` starts from the newest key. */
  *list<T>(
    tenant: string,
    kind: Kind,
    options: { reverse?: boolean; limit?: number; prefix?: string } = {},
  ): Generator<T> {
    if (WRITE_BACK.has(kind)) this.flushPending();
    const low: Key = [tenant, kind, options.prefix ?? ''];
    const high = [tenant, kind, (options.prefix ?? '') + END] as Key;
    const range = this.data.getRange(
      options.reverse
        ? { start: high, end: low, reverse: true, limit: options.limit }
        : { start: low, end: high, limit: options.limit },
    );
    for (const { value } of range) yield value as T;
  }

  /** Numeric-keyed records (audit sequence) in order. */
  *listNumeric<T>(tenant: string, kind: Kind, options: { reverse?: boolean; limit?: number } = {}): Generator<T> {
    const low: Key = [tenant, kind, 0];
    const high: Key = [tenant, kind, Number.MAX_SAFE_INTEGER];
    const range = this.data.getRange(
      options.reverse
        ? { start: high, end: low, reverse: true, limit: options.limit }
        : { start: low, end: high, limit: options.limit },
    );
    for (const { value } of range) yield value as T;
  }

  getGlobal<T>(...key: string[]): T | undefined {
    return this.global.get(key) as T | undefined;
  }

  putGlobal(value: unknown, ...key: string[]): void {
    this.global.put(key, value).catch(this.failed);
  }

  *listGlobal<T>(prefix: string): Generator<T> {
    for (const { value } of this.global.getRange({ start: [prefix], end: [prefix, END] })) yield value as T;
  }

  /**
   * Runs `fn` as one LMDB write transaction: all of its puts land together or not at all, and
   * reads inside it see its own writes. Synchronous on purpose: it keeps the critical section
   * free of awaits, so concurrent requests cannot interleave inside it.
   */
  transaction<T>(fn: () => T): T {
    return this.root.transactionSync(fn);
  }

  /**
   * A transaction for many small changes to the same records (the event processor's batches):
   * envelopes, budgets and counters are kept in memory while `fn` runs and each is serialised
   * and written once at the end, instead of once per change. Reads see the pending values.
   */
  batch<T>(fn: () => T): T {
    return this.root.transactionSync(() => {
      this.pending = new Map();
      try {
        const result = fn();
        this.flushPending();
        return result;
      } finally {
        this.pending = null;
      }
    });
  }

  private flushPending(): void {
    if (this.pending === null) return;
    for (const { key, value } of this.pending.values()) this.data.put(key, value).catch(this.failed);
    this.pending.clear();
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
