import { z } from 'zod';
import { collectUpTo } from '../storage/paging.ts';
import type { Page, PageRequest } from '../storage/storage.ts';
import { MAX_PAGE_SIZE } from '../storage/storage.ts';

const PageSize = z.coerce.number().int().min(1).max(MAX_PAGE_SIZE);
const PageToken = z.string().max(1000);

/** `page_size` (default 20, at most 100) and the opaque `page_token` of the page before, in either spelling. */
export const PagingQueryFields = {
  page_size: PageSize.optional(),
  pageSize: PageSize.optional(),
  page_token: PageToken.optional(),
  pageToken: PageToken.optional(),
};

export function pageRequest(query: {
  page_size?: number | undefined;
  pageSize?: number | undefined;
  page_token?: string | undefined;
  pageToken?: string | undefined;
}): PageRequest {
  return { pageSize: query.page_size ?? query.pageSize, pageToken: query.page_token ?? query.pageToken };
}

/**
 * Where a list answers with a bare array (its documented shape), the token of the next page
 * travels in this header; the last page sends none.
 */
export const NEXT_PAGE_TOKEN_HEADER = 'x-next-page-token';

export const NextPageHeaders = z.object({
  [NEXT_PAGE_TOKEN_HEADER]: z
    .string()
    .optional()
    .meta({ description: 'the opaque page_token of the next page; absent on the last page' }),
});

export function nextPageHeaders(nextPageToken: string | null): Record<string, string> {
  return nextPageToken === null ? {} : { [NEXT_PAGE_TOKEN_HEADER]: nextPageToken };
}

/** The `limit` the older lists took (up to 1000 in one array), still accepted beside the paging. */
export const LimitOrPagingQueryFields = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .optional()
    .meta({ description: 'without page_size or page_token: up to this many items in one answer, no next token' }),
  ...PagingQueryFields,
};

/**
 * A page of a list that also takes `limit`: `limit` alone answers up to that many in one array,
 * with no next token unless a filtered list stopped at the storage's bound on rows read; anything
 * else is a page like every list's.
 */
export async function pageOrLimit<T>(
  query: Parameters<typeof pageRequest>[0] & { limit?: number | undefined },
  fetch: (page: PageRequest) => Promise<Page<T>>,
): Promise<Page<T>> {
  const page = pageRequest(query);
  if (query.limit !== undefined && page.pageSize === undefined && page.pageToken === undefined)
    return collectUpTo(fetch, query.limit);
  return fetch(page);
}
