import { decodePageToken, pageSizeOf, takePage } from '../paging.ts';
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
