import { v7 } from 'uuid';

/**
 * A UUID version 7 (RFC 9562): the creation time in milliseconds, then random bits. Ids made later
 * sort after earlier ones (to the millisecond), so a list in id order is a list in creation order
 * and can stop after the first matches instead of reading and sorting everything; and a store
 * keyed by them appends to its last pages where random ids would rewrite a page per record
 * (test/bench/event-ids.ts).
 */
export function timeOrderedUuid(now: Date = new Date()): string {
  return v7({ msecs: now.getTime() });
}
