import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../storage/storage.ts';

/** The paging inputs of a list tool: the same defaults as every other list surface. */
export const McpPagingInput = {
  page_size: z
    .int()
    .min(1)
    .max(MAX_PAGE_SIZE)
    .optional()
    .describe(`items per page (default ${DEFAULT_PAGE_SIZE}, at most ${MAX_PAGE_SIZE})`),
  page_token: z.string().max(1000).optional().describe('next_page_token of the page before; absent for the first'),
};

export const McpNextPageToken = {
  next_page_token: z.string().nullable().describe('pass as page_token for the next page; null on the last page'),
};

export function mcpPageRequest(input: { page_size?: number | undefined; page_token?: string | undefined }) {
  return { pageSize: input.page_size, pageToken: input.page_token };
}

/** The tail of a list tool's text: a model reading only the text learns there is more. */
export function morePages(nextPageToken: string | null): string {
  return nextPageToken === null ? '' : ' (more: pass next_page_token as page_token)';
}
