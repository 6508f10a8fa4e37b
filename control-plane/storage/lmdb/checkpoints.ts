import { MAX_VERSION, type Checkpoint, type CheckpointOrder } from '../../checkpoints/checkpoint.ts';
import { versionsExhausted } from '../../checkpoints/errors.ts';
import { taken } from '../conflict.ts';
import type { CheckpointFilter, CheckpointRepository, Page, PageRequest } from '../storage.ts';
import type { Entry, Id, KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { mergedRanges } from './merged-ranges.ts';
import { pageOfScanned, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/**
 * The time index id: `created_at` (an ISO date-time of fixed length, as the service writes it),
 * the version zero-padded, then the execution id, so that id order is the query order.
 */
export const timeId = (c: CheckpointSummary) =>
  `${c.created_at}${String(c.version).padStart(10, '0')}${c.execution_id}`;

/** A checkpoint without its `data` (up to 1 MiB): what lists filter on, read without the data. */
export type CheckpointSummary = Omit<Checkpoint, 'data'>;

export function summaryOf(c: Checkpoint): CheckpointSummary {
  const { data: _, ...summary } = c;
  return summary;
}

const within = (low: number | string | undefined, value: number | string, high: number | string | undefined) =>
  (low === undefined || value >= low) && (high === undefined || value <= high);

function matches(c: CheckpointSummary, f: CheckpointFilter): boolean {
  const anyOf = <T>(list: readonly T[] | undefined, value: T) =>
    list === undefined || list.length === 0 || list.includes(value);
  return (
    (f.includeDeleted === true || c.deleted_at === null) &&
    anyOf(f.envelopeIds, c.envelope_id) &&
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
 * Checkpoints under `[tenant, 'checkpoint', execution_id, version]`, each with its summary (no
 * `data`) under `[tenant, 'checkpoint_summary', execution_id, version]`, so lists filter and prune
 * without reading data. Indexes: by time (`checkpoint_time`, the query order, for the tenant and
 * `checkpoint_exec_time` per execution, each id → `[execution id, version]`), by checkpoint id
 * (`[tenant, 'checkpoint_ref', checkpoint_id, version]` → execution id), and each execution's
 * highest version ever (`checkpoint_head`), so a version number is never given twice even after
 * pruning. A list reads at most FILTER_SCAN_LIMIT summaries per page.
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
    const summaries = this.#summaries(tenant, executionId, { reverse: true, after });
    return this.#full(
      tenant,
      pageOfScanned(summaries, (c) => c.deleted_at === null, size),
    );
  }

  query(tenant: string, filter: CheckpointFilter, order: CheckpointOrder, request?: PageRequest): Page<Checkpoint> {
    const { size, after } = pageStart(request);
    const reverse = order === 'created_at desc';
    // Executions named: only their ranges are read, so `matches` leaves the execution ids out.
    const executions = [...new Set(filter.executionIds ?? [])];
    const index =
      executions.length === 0
        ? this.#kv.range<[string, number]>(this.#layout.tenant(tenant, 'checkpoint_time'), { reverse, after })
        : mergedRanges(
            executions.map((executionId) =>
              this.#kv.range<[string, number]>(this.#layout.nested(tenant, 'checkpoint_exec_time', executionId), {
                reverse,
                after,
              }),
            ),
            reverse,
          );
    return this.#full(
      tenant,
      pageOfScanned(
        this.#indexed(tenant, index),
        (c): c is CheckpointSummary => c !== undefined && matches(c, filter),
        size,
      ),
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
    indexCheckpoint(this.#kv, this.#layout, tenant, stored);
    this.#kv.put(
      this.#layout.nested(tenant, 'checkpoint_ref', stored.checkpoint_id),
      stored.version,
      stored.execution_id,
    );
    this.#kv.put(heads, stored.execution_id, Math.max(head, stored.version));
    return stored;
  }

  /** Transactions run one at a time here: nothing is admitted between the count and the commit. */
  admitExecution(tenant: string, executionId: string, max: number): boolean {
    const heads = this.#layout.tenant(tenant, 'checkpoint_head');
    return this.#kv.get(heads, executionId) !== undefined || this.#kv.count(heads) < max;
  }

  removeCreatedBefore(tenant: string, before: string, limit: number): number {
    const doomed: CheckpointSummary[] = [];
    const oldest = this.#kv.range<[string, number]>(this.#layout.tenant(tenant, 'checkpoint_time'));
    for (const { value } of this.#indexed(tenant, oldest)) {
      if (doomed.length === limit) break;
      if (value === undefined) continue;
      if (value.created_at >= before) break;
      doomed.push(value);
    }
    // Removed after the walk: the range reads the staged view, which these removals change.
    for (const c of doomed) this.#remove(tenant, c);
    for (const executionId of new Set(doomed.map((c) => c.execution_id))) {
      const [left] = this.#summaries(tenant, executionId);
      if (left === undefined) this.#kv.remove(this.#layout.tenant(tenant, 'checkpoint_head'), executionId);
    }
    return doomed.length;
  }

  prune(tenant: string, executionId: string, keep: number): number {
    let count = 0;
    for (const _ of this.#summaries(tenant, executionId)) count += 1;
    const doomed: CheckpointSummary[] = [];
    for (const { value } of this.#summaries(tenant, executionId)) {
      if (count - doomed.length <= keep) break;
      doomed.push(value);
    }
    // Removed after the walk: the range reads the staged view, which these removals change.
    for (const c of doomed) this.#remove(tenant, c);
    return doomed.length;
  }

  delete(tenant: string, executionId: string, checkpointId: string | null, mode: { soft: string } | 'hard'): number {
    const chosen: CheckpointSummary[] = [];
    if (checkpointId === null) for (const { value } of this.#summaries(tenant, executionId)) chosen.push(value);
    else
      for (const { id, value } of this.#refs(tenant, checkpointId, false)) {
        const summary = this.#summary(tenant, value, id as number);
        if (value === executionId && summary !== undefined) chosen.push(summary);
      }
    for (const c of chosen) {
      if (mode === 'hard') this.#remove(tenant, c);
      else if (c.deleted_at === null) {
        const stored = this.get(tenant, c.execution_id, c.version)!;
        const deleted = { ...stored, deleted_at: mode.soft };
        this.#kv.put(this.#layout.nested(tenant, 'checkpoint', c.execution_id), c.version, deleted);
        this.#kv.put(this.#layout.nested(tenant, 'checkpoint_summary', c.execution_id), c.version, summaryOf(deleted));
      }
    }
    return chosen.length;
  }

  #summary(tenant: string, executionId: string, version: number): CheckpointSummary | undefined {
    return this.#kv.get<CheckpointSummary>(this.#layout.nested(tenant, 'checkpoint_summary', executionId), version);
  }

  /** The summaries a time index names, each under its index id (undefined where one is gone). */
  *#indexed(tenant: string, index: Iterable<Entry<[string, number]>>): Generator<Entry<CheckpointSummary | undefined>> {
    for (const { id, value } of index) yield { id, value: this.#summary(tenant, value[0], value[1]) };
  }

  #summaries(
    tenant: string,
    executionId: string,
    options: { reverse?: boolean; after?: Id | undefined } = {},
  ): Iterable<Entry<CheckpointSummary>> {
    return this.#kv.range<CheckpointSummary>(this.#layout.nested(tenant, 'checkpoint_summary', executionId), {
      numeric: true,
      ...options,
    });
  }

  /** The page with each summary replaced by its checkpoint, data included (read only for the page's items). */
  #full(tenant: string, page: Page<CheckpointSummary>): Page<Checkpoint> {
    const items = page.items.flatMap((c) => this.get(tenant, c.execution_id, c.version) ?? []);
    return { items, nextPageToken: page.nextPageToken };
  }

  #refs(tenant: string, checkpointId: string, reverse: boolean): Iterable<Entry<string>> {
    return this.#kv.range<string>(this.#layout.nested(tenant, 'checkpoint_ref', checkpointId), {
      numeric: true,
      reverse,
    });
  }

  #remove(tenant: string, c: CheckpointSummary): void {
    this.#kv.remove(this.#layout.nested(tenant, 'checkpoint', c.execution_id), c.version);
    this.#kv.remove(this.#layout.nested(tenant, 'checkpoint_summary', c.execution_id), c.version);
    this.#kv.remove(this.#layout.tenant(tenant, 'checkpoint_time'), timeId(c));
    this.#kv.remove(this.#layout.nested(tenant, 'checkpoint_exec_time', c.execution_id), timeId(c));
    this.#kv.remove(this.#layout.nested(tenant, 'checkpoint_ref', c.checkpoint_id), c.version);
  }
}

/**
 * Writes a stored checkpoint's summary and its entries in both time indexes: at every insert, and
 * by migration 4 for the checkpoints of stores written before the summaries.
 */
export function indexCheckpoint(kv: KvView, layout: Layout, tenant: string, c: Checkpoint): void {
  const at: [string, number] = [c.execution_id, c.version];
  kv.put(layout.nested(tenant, 'checkpoint_summary', c.execution_id), c.version, summaryOf(c));
  kv.put(layout.tenant(tenant, 'checkpoint_time'), timeId(c), at);
  kv.put(layout.nested(tenant, 'checkpoint_exec_time', c.execution_id), timeId(c), at);
}
