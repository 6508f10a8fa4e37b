import { setImmediate as turn } from 'node:timers/promises';
import { SYSTEM_TENANT } from '../../core/domain/index.ts';
import { VIOLATION_DEDUP_SCOPE } from '../processor/event-processor.ts';
import type { RemovedSlice, Repositories, Storage } from '../storage/storage.ts';

/** What retention removes (docs/storage.md, "Retention"). */
export type RetainedKind =
  'events' | 'detections' | 'processed_messages' | 'leases' | 'lease_reports' | 'checkpoints' | 'execution_contexts';

export interface RetentionSweepOptions {
  storage: Storage;
  /** Records older than this many days go; 0 keeps every record. */
  days: number;
  /** Records one transaction removes (or, for de-duplication entries and LMDB's leases, looks at) at most. */
  batchSize: number;
  clock: () => Date;
  /** Told of each batch's removals (the svc_retention_removed_total counter). */
  onRemoved: (kind: RetainedKind, count: number) => void;
  /** How long the event stream may hand a message over again, in ms; null without limit (`Bus`). */
  redeliverableForMs: () => Promise<number | null>;
  /** Told, on each sweep that keeps them, that the de-duplication records stay and why. */
  onDedupKept: (redeliverableForMs: number | null) => void;
}

const DAY_MS = 86_400_000;

/**
 * Removes, tenant by tenant, the usage events received, the Immune System's detections made, the
 * proxies' violation messages handled, the budget leases expired, the lease report numbers last
 * counted, the checkpoints saved and the execution contexts last updated more than `days` ago. (A proxy sends a report again only while its renewal's answer is
 * lost, seconds to minutes; a number older than the retention guards nothing.) Events and violation
 * messages are their own de-duplication records: they stay while the event stream can hand their
 * message over again that long after (its max age as the server has it, which an operator may have
 * raised or lifted whatever the configuration says), or a redelivery would count twice. Each batch is a
 * transaction of its own, and the sweep yields to the event loop between batches, so the event
 * processor's and the API's writes never wait for more than one small batch. Budgets keep their
 * period totals in their own records, which no sweep touches; the audit chain is immutable and
 * kept whole.
 */
export class RetentionSweep {
  readonly #options: RetentionSweepOptions;

  constructor(options: RetentionSweepOptions) {
    this.#options = options;
  }

  /** One sweep over every tenant; stops early, having removed whole batches only, once aborted. */
  async runOnce(signal: AbortSignal): Promise<Record<RetainedKind, number>> {
    const removed: Record<RetainedKind, number> = {
      events: 0,
      detections: 0,
      processed_messages: 0,
      leases: 0,
      lease_reports: 0,
      checkpoints: 0,
      execution_contexts: 0,
    };
    const { days, clock } = this.#options;
    if (days === 0) return removed;
    const before = new Date(clock().getTime() - days * DAY_MS).toISOString();
    const redeliverable = await this.#options.redeliverableForMs();
    const dedupOutlived = redeliverable !== null && redeliverable < days * DAY_MS;
    if (!dedupOutlived) this.#options.onDedupKept(redeliverable);
    for await (const tenant of this.#tenants(signal)) {
      if (dedupOutlived) {
        removed.events += await this.#oldest('events', signal, (tx, batch) =>
          tx.events.removeReceivedBefore(tenant, before, batch),
        );
      }
      removed.detections += await this.#oldest('detections', signal, (tx, batch) =>
        tx.detections.removeDetectedBefore(tenant, before, batch),
      );
      if (dedupOutlived) {
        removed.processed_messages += await this.#sliced('processed_messages', signal, (tx, after, batch) =>
          tx.dedup.removeProcessedBefore(tenant, VIOLATION_DEDUP_SCOPE, before, after, batch),
        );
      }
      removed.leases += await this.#sliced('leases', signal, (tx, after, batch) =>
        tx.leases.removeExpiredBefore(tenant, before, after, batch),
      );
      removed.lease_reports += await this.#sliced('lease_reports', signal, (tx, after, batch) =>
        tx.leases.removeReportsBefore(tenant, before, after, batch),
      );
      removed.checkpoints += await this.#oldest('checkpoints', signal, (tx, batch) =>
        tx.checkpoints.removeCreatedBefore(tenant, before, batch),
      );
      removed.execution_contexts += await this.#oldest('execution_contexts', signal, (tx, batch) =>
        tx.executionContexts.removeUpdatedBefore(tenant, before, batch),
      );
    }
    return removed;
  }

  /** Removes batch after batch of the oldest records of a kind until a batch comes back short. */
  async #oldest(
    kind: RetainedKind,
    signal: AbortSignal,
    removeBatch: (tx: Repositories, batchSize: number) => Promise<number>,
  ): Promise<number> {
    const { storage, batchSize, onRemoved } = this.#options;
    let total = 0;
    while (!signal.aborted) {
      const count = await storage.withTransaction((tx) => removeBatch(tx, batchSize));
      total += count;
      if (count > 0) onRemoved(kind, count);
      if (count < batchSize) break;
      await turn();
    }
    return total;
  }

  /** Walks a kind slice after slice, each a transaction that looks at a batch of records at most. */
  async #sliced(
    kind: RetainedKind,
    signal: AbortSignal,
    removeSlice: (tx: Repositories, after: string | null, batchSize: number) => Promise<RemovedSlice>,
  ): Promise<number> {
    const { storage, batchSize, onRemoved } = this.#options;
    let total = 0;
    let after: string | null = null;
    do {
      const from: string | null = after;
      const { removed, next }: RemovedSlice = await storage.withTransaction((tx) => removeSlice(tx, from, batchSize));
      total += removed;
      if (removed > 0) onRemoved(kind, removed);
      after = next;
      if (after !== null) await turn();
    } while (after !== null && !signal.aborted);
    return total;
  }

  /** The registered tenants and the system tenant, which exists without a record. */
  async *#tenants(signal: AbortSignal): AsyncGenerator<string> {
    yield SYSTEM_TENANT;
    let pageToken: string | null = null;
    do {
      const page = await this.#options.storage.read.tenants.list({ pageSize: 100, pageToken });
      for (const tenant of page.items) {
        if (signal.aborted) return;
        if (tenant.tenant_id !== SYSTEM_TENANT) yield tenant.tenant_id;
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== null && !signal.aborted);
  }
}
