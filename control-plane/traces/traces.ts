import { statusesOf, type Envelope, type TraceState } from '../../core/domain/index.ts';
import type { Envelopes } from '../envelopes/envelopes.ts';
import { queryEvents } from '../events/event-query.ts';
import { recordedEvaluation, type RecordedEvaluation } from '../policies/evaluation-record.ts';
import { pageOfSorted } from '../storage/paging.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Page, PageRequest, Readers } from '../storage/storage.ts';
import { scan } from '../usage/usage-summary.ts';

/** The most events a trace shows (its newest). */
export const TRACE_EVENTS_MAX = 100;

export interface TracePage<T> extends Page<T> {
  /** More records than one answer reads (SUMMARY_SCAN_LIMIT) were there: the list is not complete. */
  truncated: boolean;
}

/**
 * The guides' traces (spec 4.4): a trace is one execution's envelope, read with the events
 * recorded for it and the policy evaluations made against it (from the audit log).
 */
export class Traces {
  private readonly deps: { read: Readers; envelopes: Envelopes };

  constructor(deps: { read: Readers; envelopes: Envelopes }) {
    this.deps = deps;
  }

  /** Newest first (by creation, then id), in one trace state when asked. */
  list(tenant: string, filter: { state?: TraceState | undefined; page: PageRequest }): Promise<Page<Envelope>> {
    const statuses = filter.state === undefined ? undefined : statusesOf(filter.state);
    return this.deps.read.envelopes.listNewest(tenant, { statuses }, filter.page);
  }

  /** The trace with its newest TRACE_EVENTS_MAX events, oldest first; SVC-ENV-1001 when unknown. */
  async get(
    tenant: string,
    traceId: string,
  ): Promise<{ envelope: Envelope; events: StoredEvent[]; eventsTruncated: boolean }> {
    const envelope = await this.deps.envelopes.get(tenant, traceId);
    const events = await queryEvents(this.deps.read, tenant, { envelopeId: traceId, limit: TRACE_EVENTS_MAX + 1 });
    return {
      envelope,
      events: events.slice(0, TRACE_EVENTS_MAX).reverse(),
      eventsTruncated: events.length > TRACE_EVENTS_MAX,
    };
  }

  /**
   * The policy evaluations recorded against the trace since it opened, oldest first: those asked
   * with its envelope id and the denials proxies reported for it. The audit log is read newest
   * first down to the trace's creation, SUMMARY_SCAN_LIMIT records at most.
   */
  async evaluations(tenant: string, traceId: string, page: PageRequest): Promise<TracePage<RecordedEvaluation>> {
    const envelope = await this.deps.envelopes.get(tenant, traceId);
    const found: Array<{ seq: number; evaluation: RecordedEvaluation }> = [];
    const truncated = await scan(
      (p) =>
        this.deps.read.audit.list(tenant, { order: 'newest', action: 'policy.evaluate', resourceType: 'envelope' }, p),
      (record) => record.timestamp,
      { start: new Date(envelope.created_at) },
      (record) => {
        if (record.resource.id === traceId) found.push({ seq: record.seq, evaluation: recordedEvaluation(record) });
      },
    );
    const taken = pageOfSorted(found, page, (f) => [f.seq], [{ type: 'number', order: 'asc' }]);
    return { items: taken.items.map((f) => f.evaluation), nextPageToken: taken.nextPageToken, truncated };
  }
}
