import { setImmediate as turn } from 'node:timers/promises';
import { SvcError } from '../../core/errors/index.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type Page, type PageRequest } from './storage.ts';

/** Longer than any token a list issues (its last key's ids are bounded): refused unread. */
const MAX_TOKEN_LENGTH = 16_384;

/** A position in a list: the key of the last item returned, as the backend orders it. */
export type PageKey = ReadonlyArray<string | number>;

function invalid(field: 'page_size' | 'page_token', description: string): SvcError {
  return new SvcError('SVC-SYS-9002', `invalid request: ${field}: ${description}`, {}, [{ field, description }]);
}

/** A token that does not hold this list's position: the caller's error, SVC-SYS-9002 naming `page_token`. */
export function foreignToken(): SvcError {
  return invalid('page_token', 'not a token this list issued');
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
    throw foreignToken();
  }
  if (
    !Array.isArray(key) ||
    key.length !== shape.length ||
    key.some((part, i) => typeof part !== shape[i] || (typeof part === 'number' && !Number.isSafeInteger(part)))
  )
    throw foreignToken();
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
  return (await collect(fetch, limit, false)).items;
}

/**
 * Up to `limit` items of a paged list in one page, ending early (with the token to go on) at a
 * page that came back short before the list ended: the storage stopped it at its bound on the rows
 * one page reads, and reading on could walk a whole log for one request.
 */
export function collectUpTo<T>(fetch: (page: PageRequest) => Promise<Page<T>>, limit: number): Promise<Page<T>> {
  return collect(fetch, limit, true);
}

async function collect<T>(
  fetch: (page: PageRequest) => Promise<Page<T>>,
  limit: number,
  stopShort: boolean,
): Promise<Page<T>> {
  const items: T[] = [];
  let pageToken: string | null = null;
  for (;;) {
    const pageSize = Math.min(MAX_PAGE_SIZE, limit - items.length);
    const page: Page<T> = await fetch({ pageSize, pageToken });
    items.push(...page.items);
    pageToken = page.nextPageToken;
    if (pageToken === null || items.length >= limit) return { items, nextPageToken: null };
    if (stopShort && page.items.length < pageSize) return { items, nextPageToken: pageToken };
    // An LMDB page is read synchronously: the event loop runs between pages, not only after the list.
    await turn();
  }
}

/** One part of a sort key: its type (as a page token carries it) and its direction. */
export interface KeyPart {
  type: 'string' | 'number';
  order: 'asc' | 'desc';
}

/**
 * A page of a list ordered in memory by `keyOf` (part by part, each as `parts` says): the items
 * that sort after the token's key, so pages neither repeat nor skip an item when others are
 * added or removed between requests. Keys must be unique (end them with an id). A `list` name
 * goes into the token and must come back, so a token of another list whose key has the same
 * shape is refused rather than read as a position in this one.
 */
export function pageOfSorted<T>(
  items: readonly T[],
  request: PageRequest | undefined,
  keyOf: (item: T) => PageKey,
  parts: readonly KeyPart[],
  list?: string,
): Page<T> {
  const size = pageSizeOf(request);
  const named = list === undefined ? [] : [list];
  const token = decodePageToken(request, [...named.map(() => 'string' as const), ...parts.map((p) => p.type)]);
  if (token !== undefined && named.some((name, i) => token[i] !== name)) throw foreignToken();
  const after = token?.slice(named.length);
  const compare = (a: PageKey, b: PageKey): number => {
    for (const [i, part] of parts.entries()) {
      if (a[i] === b[i]) continue;
      const ascending = (a[i] as string | number) < (b[i] as string | number) ? -1 : 1;
      return part.order === 'asc' ? ascending : -ascending;
    }
    return 0;
  };
  const sorted = [...items].sort((x, y) => compare(keyOf(x), keyOf(y)));
  const rest = after === undefined ? sorted : sorted.filter((item) => compare(keyOf(item), after) > 0);
  return takePage(rest, size, (item) => [...named, ...keyOf(item)]);
}

/** A page of a list oldest first (ties by id): budgets and API keys, on REST and MCP alike. */
export function pageOldestFirst<T extends { created_at: string }>(
  list: string,
  items: readonly T[],
  request: PageRequest | undefined,
  idOf: (item: T) => string,
): Page<T> {
  return pageOfSorted(
    items,
    request,
    (item) => [item.created_at, idOf(item)],
    [
      { type: 'string', order: 'asc' },
      { type: 'string', order: 'asc' },
    ],
    list,
  );
}
