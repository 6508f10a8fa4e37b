import { z } from 'zod';
import { SvcError } from '../errors/index.ts';

/**
 * The bounds of every number a request may carry. They keep each figure a client sends, and
 * every sum the service keeps of them, within the exact range of a JSON number (2^53 − 1), so
 * token counts and micro-dollar costs never round and never reach Infinity.
 */

/** One recorded call: far above any model's context window or any single bill. */
export const MAX_EVENT_TOKENS = 100_000_000;
export const MAX_EVENT_COST_USD = 1_000_000;

/** Limits and estimates: 10^15 tokens, calls or executions; 10^9 USD (10^15 micro-dollars). */
export const MAX_COUNT = 1_000_000_000_000_000;
export const MAX_USD = 1_000_000_000;

/** Envelope timeouts up to a year; API key lifetimes up to ten years. */
export const MAX_TIMEOUT_SECONDS = 31_536_000;
export const MAX_KEY_LIFETIME_SECONDS = 315_360_000;

/** Names, free text, identifiers and label maps. */
export const MAX_NAME_LENGTH = 200;
export const MAX_TEXT_LENGTH = 4000;
export const MAX_ID_LENGTH = 200;
/** Path parameters: the router refuses longer ones before any handler sees them. */
export const MAX_PATH_ID_LENGTH = 100;
export const MAX_LIST_ITEMS = 100;
/** Free-form JSON (metadata, event payloads): nesting levels, the record itself being the first. */
export const MAX_METADATA_DEPTH = 32;
/**
 * Values in one free-form JSON field of a request (checkpoint data, context updates), every
 * array, object and scalar counted. Converting JSON to google.protobuf.Struct and back costs per
 * value, and the protobuf form of a small value is several times its JSON: at this bound a field
 * of 1 MiB as JSON stays under 4 MiB as protobuf, so what is stored can be read back over gRPC.
 */
export const MAX_JSON_VALUES = 100_000;

export const CountSchema = z.number().int().nonnegative().max(MAX_COUNT);
export const UsdSchema = z.number().nonnegative().max(MAX_USD);
export const NameSchema = z.string().min(1).max(MAX_NAME_LENGTH);
/**
 * An id, which becomes a storage key. Well-formed Unicode only: storage writes an unpaired surrogate
 * as a replacement character, so a record keyed by such an id would read back under another one.
 */
export const IdSchema = z
  .string()
  .min(1)
  .max(MAX_ID_LENGTH)
  .refine((id) => id.isWellFormed(), 'must be well-formed Unicode (no unpaired surrogate)');
export const PathIdSchema = z.string().min(1).max(MAX_PATH_ID_LENGTH);
export const TenantIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and -, at most 64');
/** Free-form labels: at most 50 pairs of bounded strings. */
export const TagsSchema = z
  .record(z.string().max(MAX_NAME_LENGTH), z.string().max(MAX_NAME_LENGTH))
  .refine((tags) => Object.keys(tags).length <= 50, 'at most 50 tags');

/** Running totals: token counts stop at half the exact range so input + output stays exact too. */
export const MAX_TOKEN_TOTAL = Math.floor(Number.MAX_SAFE_INTEGER / 2);
export const MAX_TOTAL = Number.MAX_SAFE_INTEGER;
/** `MAX_TOTAL` micro-dollars in USD. */
export const MAX_TOTAL_USD = MAX_TOTAL / 1_000_000;

/**
 * A cost in USD a proxy reports over the bus. It was spent and cannot be refused, so one past
 * `MAX_TOTAL_USD` is charged as that: a budget it is charged to is exhausted (see `Overflow`).
 */
export const ReportedUsdSchema = z
  .number()
  .nonnegative()
  .transform((usd) => Math.min(usd, MAX_TOTAL_USD));

/**
 * What a running total does when an addition would pass its maximum. A request over REST is
 * refused whole (SVC-EVT-4002, nothing written) so the caller learns of it. Spend a proxy reports
 * over the bus has already happened and cannot be refused: the total stays at its maximum, which
 * lies above every limit a budget may have, so the budget stays exhausted (fail closed).
 */
export type Overflow = 'refuse' | 'saturate';

/** a + b, kept at or below `max` as `overflow` says; `field` names the total in the refusal. */
export function boundedSum(a: number, b: number, field: string, overflow: Overflow, max = MAX_TOTAL): number {
  const sum = a + b;
  if (sum <= max) return sum;
  if (overflow === 'saturate') return max;
  throw new SvcError(
    'SVC-EVT-4002',
    `invalid event: ${field} would bring its running total past ${max}`,
    { field, total: a, added: b, maximum: max },
    [{ field, description: `the running total would exceed ${max}` }],
  );
}
