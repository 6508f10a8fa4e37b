import { SvcError } from '../../core/errors/index.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type Page, type PageRequest } from './storage.ts';

/** Longer than any token a list issues (its last key's ids are bounded): refused unread. */
const MAX_TOKEN_LENGTH = 16_384;

/** A position in a list: the key of the last item returned, as the backend orders it. */
export type PageKey = ReadonlyArray<string | number>;

function invalid(field: 'page_size' | 'page_token', description: string): SvcError {
  return new SvcError('SVC-SYS-9002', `invalid request: ${field}: ${description}`, {}, [{ field, description }]);
}

/** The page size asked for, checked: default 20, 1 to 100. */
export function pageSizeOf(request: PageRequest | undefined): number {
  const size = request?.pageSize ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE)
    throw invalid('page_size', `must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return size;
}

export function encodePageToken(key: PageKey): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/**
 * The key a page token carries, checked against the shape the list expects (`shape`: the type of
 * each element), or undefined for the first page. A token that does not decode is the caller's
 * error (SVC-SYS-9002 naming `page_token`), never a 500.
 */
export function decodePageToken(
  request: PageRequest | undefined,
  shape: ReadonlyArray<'string' | 'number'>,
): PageKey | undefined {
  const token = request?.pageToken;
  if (token === undefined || token === null || token === '') return undefined;
  let key: unknown;
  try {
    if (token.length > MAX_TOKEN_LENGTH || !/^[A-Za-z0-9_-]+$/.test(token)) throw new Error('not a token');
    key = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    throw invalid('page_token', 'not a token this list issued');
  }
  if (
    !Array.isArray(key) ||
    key.length !== shape.length ||
    key.some((part, i) => typeof part !== shape[i] || (typeof part === 'number' && !Number.isSafeInteger(part)))
  )
    throw invalid('page_token', 'not a token this list issued');
  return key as PageKey;
}

/** A page of up to `size` items from `candidates` (in list order), with the token after the last. */
export function takePage<T>(candidates: Iterable<T>, size: number, keyOf: (item: T) => PageKey): Page<T> {
  const items: T[] = [];
  for (const item of candidates) {
    if (items.length === size) return { items, nextPageToken: encodePageToken(keyOf(items[size - 1]!)) };
    items.push(item);
  }
  return { items, nextPageToken: null };
}

/**
 * Every item of a paged list, or the first `limit`: what services use where a surface answers
 * with one array (the REST lists keep their shapes and limits; the pages stay underneath).
 */
export async function collectPages<T>(
  fetch: (page: PageRequest) => Promise<Page<T>>,
  limit = Number.POSITIVE_INFINITY,
): Promise<T[]> {
  const out: T[] = [];
  let pageToken: string | null = null;
  do {
    const page = await fetch({ pageSize: Math.min(MAX_PAGE_SIZE, limit - out.length), pageToken });
    out.push(...page.items);
    pageToken = page.nextPageToken;
  } while (pageToken !== null && out.length < limit);
  return out;
}
