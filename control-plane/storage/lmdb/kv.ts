import type { Database } from 'lmdb';
import { nestsWithin } from '../../../core/domain/json-values.ts';
import { SvcError } from '../../../core/errors/index.ts';
import { encodedKeySize, LMDB_MAX_KEY_BYTES, surelyFits } from './key-size.ts';

/** The last part of a key: records are addressed by a space (key prefix) and an id within it. */
export type Id = string | number;
type Key = Array<string | number>;

/** A key prefix in one LMDB database: `[tenant, kind]` in `tenant_data`, `[kind]` in `global`. */
export class Space {
  readonly db: Database<unknown, Key>;
  readonly prefix: readonly string[];
  /** Identifies the space among staged writes. */
  readonly name: string;
  /** Undefined until asked for; null when a part of the prefix is not a plain id. */
  #keyPrefix: Buffer | null | undefined;

  constructor(db: Database<unknown, Key>, prefix: readonly string[], name: string) {
    this.db = db;
    this.prefix = prefix;
    this.name = name;
  }

  /**
   * The prefix as LMDB's key encoder writes it, with the separator before the id, encoded once;
   * null when a part of it is not a plain id (its keys are left to the encoder).
   */
  get keyPrefix(): Buffer | null {
    if (this.#keyPrefix === undefined) {
      this.#keyPrefix = this.prefix.every(isPlainId)
        ? Buffer.from(this.prefix.map((part) => `${part}${SEPARATOR}`).join(''), 'latin1')
        : null;
    }
    return this.#keyPrefix;
  }
}

/** What the key encoder (ordered-binary) writes between the parts of an array key. */
const SEPARATOR = '\u0000';

/**
 * Whether the encoder writes this character of an id as itself, one byte: not below 28 (a first
 * one is escaped, and those up to 4 anywhere in a short string) nor above 127 (UTF-8 sequences).
 */
function isPlainChar(c: number): boolean {
  return c >= 28 && c <= 127;
}

/**
 * Whether the encoder writes the id as its characters, one byte each (`isPlainChar`), and it is
 * not empty (escaped). Every UUID, tenant id and zero-padded position is.
 */
function isPlainId(id: string): boolean {
  if (id.length === 0) return false;
  for (let i = 0; i < id.length; i++) if (!isPlainChar(id.charCodeAt(i))) return false;
  return true;
}

export interface RangeOptions {
  /** Only ids (strings) that start with this. */
  prefix?: string | undefined;
  /** Numeric ids (the audit sequence) instead of strings. */
  numeric?: boolean;
  reverse?: boolean;
  /** Start after this id (exclusive), in the direction of the range: how pages continue. */
  after?: Id | undefined;
}

export interface Entry<T> {
  id: Id;
  value: T;
}

/**
 * Synchronous access to records, for the repositories: reads of committed state (`read`) or a
 * transaction's view of it with its own writes on top (`StagedView`).
 */
export interface KvView {
  readonly writable: boolean;
  get<T>(space: Space, id: Id): T | undefined;
  /** Whether the record is there, without decoding it. */
  has(space: Space, id: Id): boolean;
  put(space: Space, id: Id, value: unknown): void;
  remove(space: Space, id: Id): void;
  /** Records of the space in id order (or reversed), lazily. */
  range<T>(space: Space, options?: RangeOptions): Iterable<Entry<T>>;
  /** How many records the space holds (string ids, none nested below them), without reading them. */
  count(space: Space): number;
}

/** Above every string id an LMDB key of this product holds (the largest code point). */
const TOP_STRING = '\u{10FFFF}';

const keyOf = (space: Space, id: Id): Key => [...space.prefix, id];

/**
 * The record's key in LMDB: for a plain id, the bytes the encoder writes for `[...prefix, id]`,
 * built from the space's encoded prefix, which skips the encoder's walk of the array (it took
 * more CPU per event than anything else the event processor does with a key); else the array,
 * encoded by LMDB.
 */
export function recordKey(space: Space, id: Id): Key | Buffer {
  const prefix = space.keyPrefix;
  if (prefix === null || typeof id !== 'string' || id.length === 0) return keyOf(space, id);
  const key = Buffer.allocUnsafe(prefix.length + id.length);
  key.set(prefix, 0);
  // Checked as it is written: one pass over the id.
  for (let i = 0, at = prefix.length; i < id.length; i++, at++) {
    const c = id.charCodeAt(i);
    if (!isPlainChar(c)) return keyOf(space, id);
    key[at] = c;
  }
  return key;
}

/** Id order as LMDB keeps it: numbers numerically, strings by their UTF-8 bytes. */
export function compareIds(a: Id, b: Id): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function inRange(id: Id, options: RangeOptions): boolean {
  if (options.numeric === true) return typeof id === 'number';
  return typeof id === 'string' && (options.prefix === undefined || id.startsWith(options.prefix));
}

/** The committed records of a space in order, straight from LMDB. */
export function* committedRange<T>(space: Space, options: RangeOptions = {}): Generator<Entry<T>> {
  const low: Id = options.numeric === true ? 0 : (options.prefix ?? '');
  const high: Id = options.numeric === true ? Number.MAX_SAFE_INTEGER : (options.prefix ?? '') + TOP_STRING;
  const reverse = options.reverse === true;
  const from = options.after ?? (reverse ? high : low);
  const range = space.db.getRange(
    reverse
      ? { start: keyOf(space, from), end: keyOf(space, low), reverse: true }
      : { start: keyOf(space, from), end: keyOf(space, high) },
  );
  for (const { key, value } of range) {
    const id = key[key.length - 1]!;
    if (key.length !== space.prefix.length + 1 || !inRange(id, options)) continue;
    if (options.after !== undefined && id === options.after) continue;
    yield { id, value: value as T };
  }
}

/** Reads and writes of committed state: the `read` side of the storage. */
export class CommittedView implements KvView {
  readonly writable = false;

  get<T>(space: Space, id: Id): T | undefined {
    return space.db.get(recordKey(space, id) as Key) as T | undefined;
  }

  has(space: Space, id: Id): boolean {
    return space.db.doesExist(recordKey(space, id) as Key);
  }

  put(): void {
    throw new Error('storage write outside a transaction');
  }

  remove(): void {
    throw new Error('storage write outside a transaction');
  }

  range<T>(space: Space, options?: RangeOptions): Iterable<Entry<T>> {
    return committedRange<T>(space, options);
  }

  count(space: Space): number {
    return space.db.getKeysCount({ start: keyOf(space, ''), end: keyOf(space, TOP_STRING) });
  }
}

/** Above any record's own nesting plus the deepest free-form JSON a request may carry (32). */
const MAX_STORED_DEPTH = 64;

const REMOVED = Symbol('removed');
/** A write, with the key it is written under. */
type Staged = { space: Space; id: Id; key: Key | Buffer; value: unknown };

/** The record's key, when it fits in LMDB; refused otherwise, naming no part of it (it may be anything). */
function storableKey(space: Space, id: Id): Key | Buffer {
  const key = recordKey(space, id);
  // An encoder's key is measured only near the bound (measuring it encodes it once more).
  const size = Buffer.isBuffer(key) ? key.length : surelyFits(space.prefix, id) ? 0 : encodedKeySize(key);
  if (size > LMDB_MAX_KEY_BYTES)
    throw new SvcError(
      'SVC-SYS-9009',
      `storage: a record's key would take ${size} bytes, past the ${LMDB_MAX_KEY_BYTES} LMDB stores`,
      { key_bytes: size, maximum: LMDB_MAX_KEY_BYTES },
    );
  return key;
}

/** Committed state, beneath every staged view. */
export const COMMITTED: KvView = new CommittedView();

/**
 * A transaction's view: its writes are kept in memory, one latest value per record (a record
 * written many times in a batch is written to LMDB once), and its reads see them over the layer
 * below: committed state, or the staged writes of earlier transactions waiting for their commit
 * (a commit group, itself a StagedView). `commit` writes them all inside the caller's LMDB write
 * transaction.
 */
export class StagedView implements KvView {
  readonly writable = true;
  /** Per space, per id: the latest value (or REMOVED). */
  readonly #staged = new Map<string, Map<Id, Staged>>();
  #size = 0;
  /** What reads see beneath the own writes; set to committed state once the layer below is in LMDB. */
  base: KvView;

  constructor(base: KvView = COMMITTED) {
    this.base = base;
  }

  /** Whether nothing was written. */
  get empty(): boolean {
    return this.#size === 0;
  }

  /** How many records are staged (written or removed). */
  get size(): number {
    return this.#size;
  }

  get<T>(space: Space, id: Id): T | undefined {
    const staged = this.#staged.get(space.name)?.get(id);
    if (staged === undefined) return this.base.get<T>(space, id);
    return staged.value === REMOVED ? undefined : (staged.value as T);
  }

  has(space: Space, id: Id): boolean {
    const staged = this.#staged.get(space.name)?.get(id);
    return staged === undefined ? this.base.has(space, id) : staged.value !== REMOVED;
  }

  put(space: Space, id: Id, value: unknown): void {
    // Encoded only at the group's commit, where a value too deep for the encoder's stack, or a key
    // past LMDB's size, would fail every transaction grouped with this one, other tenants' too:
    // refused here, alone.
    if (!nestsWithin(value, MAX_STORED_DEPTH))
      throw new Error(`storage: a record nests deeper than ${MAX_STORED_DEPTH} levels`);
    this.#stage(space, id, storableKey(space, id), value);
  }

  remove(space: Space, id: Id): void {
    this.#stage(space, id, storableKey(space, id), REMOVED);
  }

  *range<T>(space: Space, options: RangeOptions = {}): Generator<Entry<T>> {
    const ownWrites = this.#staged.get(space.name);
    if (ownWrites === undefined || ownWrites.size === 0) {
      yield* this.base.range<T>(space, options);
      return;
    }
    const direction = options.reverse === true ? -1 : 1;
    const after = options.after;
    const staged = [...ownWrites.values()]
      .filter((s) => inRange(s.id, options) && (after === undefined || compareIds(s.id, after) * direction > 0))
      .sort((a, b) => compareIds(a.id, b.id) * direction);
    let i = 0;
    for (const entry of this.base.range<T>(space, options)) {
      while (i < staged.length && compareIds(staged[i]!.id, entry.id) * direction < 0) {
        const s = staged[i++]!;
        if (s.value !== REMOVED) yield { id: s.id, value: s.value as T };
      }
      if (ownWrites.has(entry.id)) continue;
      yield entry;
    }
    for (; i < staged.length; i++) {
      const s = staged[i]!;
      if (s.value !== REMOVED) yield { id: s.id, value: s.value as T };
    }
  }

  count(space: Space): number {
    let count = this.base.count(space);
    for (const { id, value } of this.#staged.get(space.name)?.values() ?? []) {
      const below = this.base.get(space, id) !== undefined;
      if (value === REMOVED && below) count -= 1;
      else if (value !== REMOVED && !below) count += 1;
    }
    return count;
  }

  /** Takes over the writes of a later transaction: its values replace those staged here. */
  absorb(later: StagedView): void {
    for (const [name, writes] of later.#staged) {
      const own = this.#staged.get(name);
      if (own === undefined) {
        this.#staged.set(name, new Map(writes));
        this.#size += writes.size;
      } else {
        const before = own.size;
        for (const [id, staged] of writes) own.set(id, staged);
        this.#size += own.size - before;
      }
    }
  }

  /** Writes every staged change; call inside an LMDB write transaction. */
  commit(): void {
    for (const writes of this.#staged.values()) {
      for (const { space, key, value } of writes.values()) {
        if (value === REMOVED) space.db.removeSync(key as Key);
        else space.db.putSync(key as Key, value);
      }
    }
  }

  #stage(space: Space, id: Id, key: Key | Buffer, value: unknown): void {
    let writes = this.#staged.get(space.name);
    if (writes === undefined) this.#staged.set(space.name, (writes = new Map<Id, Staged>()));
    const before = writes.size;
    writes.set(id, { space, id, key, value });
    this.#size += writes.size - before;
  }
}
