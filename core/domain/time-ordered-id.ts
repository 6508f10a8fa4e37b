import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

/**
 * Random bytes for many ids, drawn at once: one draw per id (the package's own source) costs
 * about 2 µs, as much as the rest of the id four times over.
 */
const pool = Buffer.alloc(16 * 256);
let taken = pool.length;

function random16(): Uint8Array {
  if (taken === pool.length) {
    randomFillSync(pool);
    taken = 0;
  }
  taken += 16;
  return pool.subarray(taken - 16, taken);
}

/**
 * A UUID version 7 (RFC 9562): the creation time in milliseconds, then random bits. Ids made later
 * sort after earlier ones (to the millisecond), so a list in id order is a list in creation order
 * and can stop after the first matches instead of reading and sorting everything; and a store
 * keyed by them appends to its last pages where random ids would rewrite a page per record
 * (test/bench/event-ids.ts).
 */
export function timeOrderedUuid(now: Date = new Date()): string {
  return v7({ msecs: now.getTime(), random: random16() });
}
