import { collectPages } from '../storage/paging.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Readers } from '../storage/storage.ts';

export interface EventFilter {
  envelopeId?: string | undefined;
  eventType?: string | undefined;
  limit: number;
}

/**
 * Stored events of a tenant, newest first, by envelope and event type. An event type ending in
 * `.*` (`llm.*`) selects the family.
 */
export function queryEvents(read: Readers, tenant: string, filter: EventFilter): Promise<StoredEvent[]> {
  return collectPages(
    (page) => read.events.list(tenant, { envelopeId: filter.envelopeId, eventType: filter.eventType }, page),
    filter.limit,
  );
}
