import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type Page, type PageRequest } from '../../storage/storage.ts';
import { invalidField, present } from './well-known.ts';

/**
 * The page a gRPC list asks for, in the paging every surface shares (storage/paging.ts): the same
 * sizes and the same tokens, so a token of a REST or MCP page continues over gRPC. Only the size
 * rule is gRPC's own (AIP-158): 0 means the default, one above the maximum is lowered to it; a
 * negative one is refused naming the field.
 */
export function grpcPageRequest(request: { page_size?: unknown; page_token?: unknown }): PageRequest {
  const size = Number(request.page_size ?? 0);
  if (!Number.isInteger(size) || size < 0) throw invalidField('page_size', 'must not be negative');
  return {
    pageSize: size === 0 ? DEFAULT_PAGE_SIZE : Math.min(size, MAX_PAGE_SIZE),
    pageToken: present(request.page_token) ?? null,
  };
}

/** A page's next token as proto3 carries it: empty on the last page. */
export function grpcNextPageToken(page: Pick<Page<unknown>, 'nextPageToken'>): string {
  return page.nextPageToken ?? '';
}
