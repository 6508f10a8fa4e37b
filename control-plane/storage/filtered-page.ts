import { decodePageToken, encodePageToken, foreignToken, pageSizeOf, type PageKey } from './paging.ts';
import { MAX_PAGE_SIZE, type Page, type PageRequest } from './storage.ts';

/** Storage pages (of MAX_PAGE_SIZE items) one filtered page reads at most. */
export const FILTERED_FETCH_LIMIT = 10;

/** What `select` answers for an item the walk should end at: the list holds nothing further for it. */
export const END_OF_WALK = Symbol('end of walk');

/**
 * A page of the items `select` keeps (mapped as it answers; undefined skips), walking a storage
 * list in its order. `keyOf` gives an item's position as the list's tokens hold it, so a page that
 * fills part way through a storage page continues after its last item. A filter that keeps little
 * must not make one request walk a whole history: past FILTERED_FETCH_LIMIT storage pages the page
 * is answered short, with the token to read on. Pages may be short before the list ends, never
 * wrong; only a null token ends it.
 */
export async function filteredPage<T, U>(
  fetch: (page: PageRequest) => Promise<Page<T>>,
  select: (item: T) => U | undefined | typeof END_OF_WALK,
  keyOf: (item: T) => PageKey,
  request: PageRequest,
): Promise<Page<U>> {
  const size = pageSizeOf(request);
  const items: U[] = [];
  let last: T | undefined;
  let pageToken = request.pageToken ?? null;
  for (let fetched = 1; ; fetched += 1) {
    const page = await fetch({ pageSize: MAX_PAGE_SIZE, pageToken });
    for (const item of page.items) {
      const kept = select(item);
      if (kept === END_OF_WALK) return { items, nextPageToken: null };
      if (kept === undefined) continue;
      if (items.length === size) return { items, nextPageToken: encodePageToken(keyOf(last!)) };
      items.push(kept);
      last = item;
    }
    pageToken = page.nextPageToken;
    if (pageToken === null || fetched === FILTERED_FETCH_LIMIT) return { items, nextPageToken: pageToken };
  }
}

/**
 * A list whose tokens carry its name beside the position `fetch` understands, so a token another
 * list issued (of the same storage list or not) is refused rather than read as a position here.
 */
export async function namedPages<T>(
  list: string,
  request: PageRequest,
  fetch: (page: PageRequest) => Promise<Page<T>>,
): Promise<Page<T>> {
  const token = decodePageToken(request, ['string', 'string']);
  if (token !== undefined && token[0] !== list) throw foreignToken();
  const page = await fetch({ pageSize: request.pageSize, pageToken: token?.[1] as string | undefined });
  return {
    items: page.items,
    nextPageToken: page.nextPageToken === null ? null : encodePageToken([list, page.nextPageToken]),
  };
}
