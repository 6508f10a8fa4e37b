import type { Store } from '../store/store.ts';
import type { StoredEvent } from '../usage/apply-usage.ts';

export interface EventFilter {
  envelopeId?: string | undefined;
  eventType?: string | undefined;
  limit: number;
}

/**
 * Stored events of a tenant, newest first, by envelope and event type. An event type ending in
 * `.*` (`llm.*`) selects the family.
 */
export function queryEvents(store: Store, tenant: string, filter: EventFilter): StoredEvent[] {
  const ids =
    filter.envelopeId === undefined
      ? store.list<string>(tenant, 'event_log', { reverse: true })
      : store.list<string>(tenant, 'envelope_event', { reverse: true, prefix: `${filter.envelopeId}/` });
  const family = filter.eventType?.endsWith('.*') ? filter.eventType.slice(0, -1) : undefined;
  const out: StoredEvent[] = [];
  for (const id of ids) {
    const event = store.get<StoredEvent>(tenant, 'event', id);
    if (event === undefined) continue;
    if (
      filter.eventType !== undefined &&
      (family !== undefined ? !event.event_type.startsWith(family) : event.event_type !== filter.eventType)
    )
      continue;
    out.push(event);
    if (out.length >= filter.limit) break;
  }
  return out;
}
