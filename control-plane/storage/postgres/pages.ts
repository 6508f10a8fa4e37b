import { decodePageToken, encodePageToken, pageSizeOf } from '../paging.ts';
import type { Page, PageRequest } from '../storage.ts';

/**
 * Keyset paging: a page continues after the key of the last item of the page before (the same
 * opaque token as LMDB's, `control-plane/storage/paging.ts`). Queries ask for one row more than
 * the page holds, which tells whether another page follows.
 */
export function pageStart<K extends string | number>(
  request: PageRequest | undefined,
  keyType: K extends string ? 'string' : 'number',
): { size: number; after: K | null } {
  const key = decodePageToken(request, [keyType]);
  return { size: pageSizeOf(request), after: (key?.[0] as K | undefined) ?? null };
}

/** The page of `rows` (up to `size + 1` fetched in list order), each made an item by `item`. */
export function pageOf<R, T>(
  rows: readonly R[],
  size: number,
  keyOf: (row: R) => string | number,
  item: (row: R) => T,
): Page<T> {
  const items = rows.slice(0, size);
  const last = items[items.length - 1];
  return {
    items: items.map(item),
    nextPageToken: rows.length > size && last !== undefined ? encodePageToken([keyOf(last)]) : null,
  };
}
