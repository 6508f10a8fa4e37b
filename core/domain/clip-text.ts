import { createHash } from 'node:crypto';

/**
 * `text` cut to at most `max` characters (max ≥ 16), its end replaced by `…` and the first eight
 * hex digits of its SHA-256, so two long texts that share a beginning stay apart. For what a
 * caller or a provider chose (a tool's name, a denial's message) that goes into a record with a
 * bound: the record is kept, shortened, rather than refused for the length of one field.
 */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 8);
  return `${text.slice(0, max - 9).toWellFormed()}…${digest}`;
}
