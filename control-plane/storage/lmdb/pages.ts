import { decodePageToken, encodePageToken, pageSizeOf, takePage } from '../paging.ts';
import type { Page, PageRequest } from '../storage.ts';
import type { Entry, Id } from './kv.ts';

/** Where a page starts and how long it is: the id after which it continues, from the token. */
export function pageStart(
  request: PageRequest | undefined,
  idType: 'string' | 'number' = 'string',
): { size: number; after: Id | undefined } {
  return { size: pageSizeOf(request), after: decodePageToken(request, [idType])?.[0] };
}

/** A page of entries (ids in list order); its token is the id of its last entry. */
export function pageOf<T>(entries: Iterable<Entry<T>>, size: number): Page<T> {
  const page = takePage(entries, size, (entry) => [entry.id]);
  return { items: page.items.map((entry) => entry.value), nextPageToken: page.nextPageToken };
}

export function* where<T>(entries: Iterable<Entry<T>>, keep: (value: T) => boolean): Generator<Entry<T>> {
  for (const entry of entries) if (keep(entry.value)) yield entry;
}

/**
 * Rows a filtered list reads for one page at most. An LMDB read is synchronous and holds the event
 * loop of the whole control plane, so a filter that matches little (or nothing) in a long log must
 * not walk all of it in one call: about 10 ms of reading here.
 */
export const FILTER_SCAN_LIMIT = 1_000;

/**
 * A page of the entries `keep` accepts, reading at most FILTER_SCAN_LIMIT entries. A page cut short
 * by that bound carries the id of the last entry read as its token (even with no item), so the next
 * page continues from there: pages may be short before the list ends, never wrong.
 */
export function pageOfScanned<T, U extends T>(
  entries: Iterable<Entry<T>>,
  keep: (value: T) => value is U,
  size: number,
): Page<U>;
export function pageOfScanned<T>(entries: Iterable<Entry<T>>, keep: (value: T) => boolean, size: number): Page<T>;
export function pageOfScanned<T>(entries: Iterable<Entry<T>>, keep: (value: T) => boolean, size: number): Page<T> {
  const items: T[] = [];
  let lastKept: Id | undefined;
  let lastRead: Id | undefined;
  let read = 0;
  for (const entry of entries) {
    if (read === FILTER_SCAN_LIMIT) return { items, nextPageToken: encodePageToken([lastRead!]) };
    read += 1;
    if (keep(entry.value)) {
      if (items.length === size) return { items, nextPageToken: encodePageToken([lastKept!]) };
      items.push(entry.value);
      lastKept = entry.id;
    }
    lastRead = entry.id;
  }
  return { items, nextPageToken: null };
}
