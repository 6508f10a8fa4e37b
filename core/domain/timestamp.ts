import { z } from 'zod';

/** Nanoseconds, as fine as a gRPC Timestamp is. */
export const MAX_FRACTION_DIGITS = 9;
const TOO_FINE = new RegExp(`\\.\\d{${MAX_FRACTION_DIGITS + 1}}`);
/** The one form every time is kept in: UTC, milliseconds. Text order is then time order. */
const CANONICAL = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const PARTS = /^(.{19})(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/;
/** `toISOString` writes a year outside 0000–9999 with a sign and six digits. */
const EXPANDED_YEAR = /^[+-]/;

/**
 * An RFC 3339 date-time (as TimestampSchema accepts it) in the canonical form
 * `YYYY-MM-DDTHH:MM:SS.sssZ`. Digits past the millisecond are cut, not rounded, so that an
 * instant never moves to a later millisecond (past an `until` it was before). A year outside
 * 0000–9999 once in UTC comes back with a sign (`+010000-…`), which the schema refuses. Text that
 * is no date-time comes back as it was.
 */
export function canonicalTime(iso: string): string {
  // Nearly every time arrives canonical (the proxy and the control plane write them so): one regex.
  if (CANONICAL.test(iso)) return iso;
  const parts = PARTS.exec(iso);
  if (parts === null) return iso;
  const [, seconds, fraction = '', zone] = parts;
  const ms = Date.parse(`${seconds}.${fraction.slice(0, 3).padEnd(3, '0')}${zone}`);
  return Number.isNaN(ms) ? iso : new Date(ms).toISOString();
}

/**
 * An RFC 3339 date-time with `Z` or an offset, given back in the canonical form of
 * `canonicalTime`: stores order and filter times by their text (index keys, text columns), which
 * two spellings of one instant would put apart. Its fraction of a second is bounded: a timestamp
 * becomes part of storage keys, and one with thousands of digits would pass their size.
 * `overwrite` keeps input and output a string, so JSON schemas made of it still describe it.
 */
export const TimestampSchema = z.iso
  .datetime({ offset: true })
  .refine((iso) => !TOO_FINE.test(iso), `must give at most ${MAX_FRACTION_DIGITS} digits of a second`)
  .overwrite(canonicalTime)
  .refine((iso) => !EXPANDED_YEAR.test(iso), 'must fall in the years 0000 to 9999 once converted to UTC');
