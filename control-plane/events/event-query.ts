import { collectPages } from '../storage/paging.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Page, PageRequest, Readers } from '../storage/storage.ts';

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
  return collectPages(eventPages(read, tenant, filter), filter.limit);
}

/** The pages of the same query, for a list answered a page at a time. */
export function eventPages(
  read: Readers,
  tenant: string,
  filter: Omit<EventFilter, 'limit'>,
): (page: PageRequest) => Promise<Page<StoredEvent>> {
  return (page) => read.events.list(tenant, { envelopeId: filter.envelopeId, eventType: filter.eventType }, page);
}
