import { invalidField } from './well-known.ts';

/** Spec 8: lists answer 20 items unless asked, and never more than 100. */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

const TOKEN = /^o([0-9]{1,9})$/;

/**
 * One page of an ordered list, with the opaque token of the next one (empty on the last page).
 * A page_size above the maximum is lowered to it; a negative one, or a token this server did not
 * issue, is refused naming the field.
 */
export function pageOf<T>(items: readonly T[], request: { page_size?: unknown; page_token?: unknown }) {
  const size = Number(request.page_size ?? 0);
  if (!Number.isInteger(size) || size < 0) throw invalidField('page_size', 'must not be negative');
  const token = typeof request.page_token === 'string' ? request.page_token : '';
  let offset = 0;
  if (token !== '') {
    const match = TOKEN.exec(Buffer.from(token, 'base64url').toString('latin1'));
    if (match === null) throw invalidField('page_token', 'not a token this list issued');
    offset = Number(match[1]);
  }
  const end = offset + Math.min(size === 0 ? DEFAULT_PAGE_SIZE : size, MAX_PAGE_SIZE);
  return {
    items: items.slice(offset, end),
    next_page_token: end < items.length ? Buffer.from(`o${end}`, 'latin1').toString('base64url') : '',
  };
}
