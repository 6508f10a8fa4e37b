import type { StoredEvent } from '../storage/records.ts';
import type { EventFilter, Readers } from '../storage/storage.ts';

const PAGE = 100;

export interface RecentEventsWalk<T> {
  tenant: string;
  filter: EventFilter;
  /** The walk ends at the first event that arrived before this (epoch ms). */
  since: number;
  /** At most this many events are read. */
  maxEvents: number;
  /** What a prediction keeps of one event, or undefined to skip it. */
  pick: (event: StoredEvent) => T | undefined;
}

/**
 * The tenant's events newest first by arrival, each reduced by `pick` as it is read. Only what
 * `pick` returns is kept: one page of whole events is in memory at a time, so a prediction over
 * `maxEvents` events with megabyte payloads holds a few numbers per event, not the payloads.
 */
export async function pickRecentEvents<T>(read: Readers, walk: RecentEventsWalk<T>): Promise<T[]> {
  const out: T[] = [];
  let pageToken: string | null = null;
  for (let seen = 0; seen < walk.maxEvents; seen += PAGE) {
    const page = await read.events.list(walk.tenant, walk.filter, { pageSize: PAGE, pageToken });
    for (const event of page.items) {
      const picked = walk.pick(event);
      if (picked !== undefined) out.push(picked);
    }
    const oldest = page.items.at(-1);
    // A page may come back empty before the list ends (storage bounds the rows a filtered page reads).
    if (page.nextPageToken === null || (oldest !== undefined && Date.parse(oldest.received_at) < walk.since)) break;
    pageToken = page.nextPageToken;
  }
  return out;
}
