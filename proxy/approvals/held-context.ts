import { MAX_HELD_CONTEXT_BYTES } from '../../core/sync/contract.ts';

/** The most of one context value an approval keeps, as JSON. */
export const MAX_CONTEXT_VALUE_BYTES = 8 * 1024;

/** Room in the kept context for its keys, the notes and JSON's punctuation. */
const KEYS_AND_NOTES_BYTES = 16 * 1024;

/**
 * The evaluation context as the approval keeps it: what a reviewer reads, as JSON. A value
 * larger than `MAX_CONTEXT_VALUE_BYTES` (a tool's arguments, say), or one that would take the
 * context past what the control plane keeps, is replaced by a note of its size, so the request
 * to open the approval is always taken whatever the call carried, and a held call holds no second
 * copy of its body.
 */
export function heldContext(context: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  let room = MAX_HELD_CONTEXT_BYTES - KEYS_AND_NOTES_BYTES;
  for (const [key, value] of Object.entries(context)) {
    const json = JSON.stringify(value) as string | undefined;
    if (json === undefined) continue;
    const bytes = Buffer.byteLength(json);
    const keep = bytes <= MAX_CONTEXT_VALUE_BYTES && bytes <= room;
    if (keep) room -= bytes;
    kept[key] = keep ? value : `[${bytes} bytes, not kept]`;
  }
  return kept;
}
