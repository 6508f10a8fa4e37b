import { MAX_VERSION, type Checkpoint, type CheckpointOrder } from '../../checkpoints/checkpoint.ts';
import { versionsExhausted } from '../../checkpoints/errors.ts';
import { taken } from '../conflict.ts';
import type { CheckpointFilter, CheckpointRepository, Page, PageRequest } from '../storage.ts';
import type { Entry, KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart, where } from './pages.ts';
import type { Sync } from './promised.ts';

/**
 * The time index id: `created_at` (an ISO date-time of fixed length, as the service writes it),
 * the version zero-padded, then the execution id, so that id order is the query order.
 */
const timeId = (c: Checkpoint) => `${c.created_at}${String(c.version).padStart(10, '0')}${c.execution_id}`;

const within = (low: number | string | undefined, value: number | string, high: number | string | undefined) =>
  (low === undefined || value >= low) && (high === undefined || value <= high);

function matches(c: Checkpoint, f: CheckpointFilter): boolean {
  const anyOf = <T>(list: readonly T[] | undefined, value: T) =>
    list === undefined || list.length === 0 || list.includes(value);
  return (
    (f.includeDeleted === true || c.deleted_at === null) &&
    anyOf(f.envelopeIds, c.envelope_id) &&
    anyOf(f.executionIds, c.execution_id) &&
    (f.types === undefined ||
      f.types.length === 0 ||
      (c.metadata.type !== null && f.types.includes(c.metadata.type))) &&
    (f.frameworkTypes === undefined ||
      f.frameworkTypes.length === 0 ||
      (c.metadata.framework_type !== null && f.frameworkTypes.includes(c.metadata.framework_type))) &&
    Object.entries(f.tags ?? {}).every(([k, v]) => Object.hasOwn(c.metadata.tags, k) && c.metadata.tags[k] === v) &&
    within(f.createdAfter, c.created_at, f.createdBefore) &&
    within(f.minCostUsd, c.metadata.cost_snapshot_usd, f.maxCostUsd) &&
    within(f.minSizeBytes, c.size_bytes, f.maxSizeBytes)
  );
}

/**
 * Checkpoints under `[tenant, 'checkpoint', execution_id, version]`, with three indexes: by time
 * (`checkpoint_time`, for queries), by checkpoint id (`[tenant, 'checkpoint_ref', checkpoint_id,
 * version]` → execution id), and each execution's highest version ever (`checkpoint_head`), so a
 * version number is never given twice even after pruning.
 */
export class LmdbCheckpoints implements Sync<CheckpointRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, executionId: string, version: number): Checkpoint | undefined {
    return this.#kv.get<Checkpoint>(this.#layout.nested(tenant, 'checkpoint', executionId), version);
  }

  latest(tenant: string, checkpointId: string): Checkpoint | undefined {
    for (const { id, value } of this.#refs(tenant, checkpointId, true)) return this.get(tenant, value, id as number);
    return undefined;
  }

  versions(tenant: string, executionId: string, request?: PageRequest): Page<Checkpoint> {
    const { size, after } = pageStart(request, 'number');
    const all = this.#kv.range<Checkpoint>(this.#layout.nested(tenant, 'checkpoint', executionId), {
      numeric: true,
      reverse: true,
      after,
    });
    return pageOf(
      where(all, (c) => c.deleted_at === null),
      size,
    );
  }

  query(tenant: string, filter: CheckpointFilter, order: CheckpointOrder, request?: PageRequest): Page<Checkpoint> {
    const { size, after } = pageStart(request);
    const index = this.#kv.range<[string, number]>(this.#layout.tenant(tenant, 'checkpoint_time'), {
      reverse: order === 'created_at desc',
      after,
    });
    const read = (executionId: string, version: number) => this.get(tenant, executionId, version);
    function* found(): Generator<Entry<Checkpoint>> {
      for (const { id, value } of index) {
        const checkpoint = read(value[0], value[1]);
        if (checkpoint !== undefined) yield { id, value: checkpoint };
      }
    }
    return pageOf(
      where(found(), (c) => matches(c, filter)),
      size,
    );
  }

  insert(tenant: string, checkpoint: Checkpoint, version: 'next' | 'given'): Checkpoint {
    const heads = this.#layout.tenant(tenant, 'checkpoint_head');
    const head = this.#kv.get<number>(heads, checkpoint.execution_id) ?? 0;
    if (version === 'next' && head >= MAX_VERSION) throw versionsExhausted(checkpoint.execution_id, head);
    const stored: Checkpoint = version === 'next' ? { ...checkpoint, version: head + 1 } : checkpoint;
    if (this.get(tenant, stored.execution_id, stored.version) !== undefined)
      throw taken(
        'checkpoint.version',
        String(stored.version),
        `execution ${stored.execution_id} has a version ${stored.version} already`,
      );
    for (const { value } of this.#refs(tenant, stored.checkpoint_id, false)) {
      if (value !== stored.execution_id)
        throw taken(
          'checkpoint.checkpoint_id',
          stored.checkpoint_id,
          `checkpoint ${stored.checkpoint_id} belongs to another execution`,
          'belongs to another execution',
        );
      break;
    }
    this.#kv.put(this.#layout.nested(tenant, 'checkpoint', stored.execution_id), stored.version, stored);
    this.#kv.put(this.#layout.tenant(tenant, 'checkpoint_time'), timeId(stored), [stored.execution_id, stored.version]);
    this.#kv.put(
      this.#layout.nested(tenant, 'checkpoint_ref', stored.checkpoint_id),
      stored.version,
      stored.execution_id,
    );
    this.#kv.put(heads, stored.execution_id, Math.max(head, stored.version));
    return stored;
  }

  prune(tenant: string, executionId: string, keep: number): number {
    const space = this.#layout.nested(tenant, 'checkpoint', executionId);
    let count = 0;
    for (const _ of this.#kv.range(space, { numeric: true })) count += 1;
    let removed = 0;
    for (const { value } of this.#kv.range<Checkpoint>(space, { numeric: true })) {
      if (count - removed <= keep) break;
      this.#remove(tenant, value);
      removed += 1;
    }
    return removed;
  }

  delete(tenant: string, executionId: string, checkpointId: string | null, mode: { soft: string } | 'hard'): number {
    const space = this.#layout.nested(tenant, 'checkpoint', executionId);
    let count = 0;
    for (const { value } of this.#kv.range<Checkpoint>(space, { numeric: true })) {
      if (checkpointId !== null && value.checkpoint_id !== checkpointId) continue;
      count += 1;
      if (mode === 'hard') this.#remove(tenant, value);
      else if (value.deleted_at === null) this.#kv.put(space, value.version, { ...value, deleted_at: mode.soft });
    }
    return count;
  }

  #refs(tenant: string, checkpointId: string, reverse: boolean): Iterable<Entry<string>> {
    return this.#kv.range<string>(this.#layout.nested(tenant, 'checkpoint_ref', checkpointId), {
      numeric: true,
      reverse,
    });
  }

  #remove(tenant: string, c: Checkpoint): void {
    this.#kv.remove(this.#layout.nested(tenant, 'checkpoint', c.execution_id), c.version);
    this.#kv.remove(this.#layout.tenant(tenant, 'checkpoint_time'), timeId(c));
    this.#kv.remove(this.#layout.nested(tenant, 'checkpoint_ref', c.checkpoint_id), c.version);
  }
}
