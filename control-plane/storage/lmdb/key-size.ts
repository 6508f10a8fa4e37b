/**
 * The largest key LMDB stores, in bytes (its build's `mdb_env_get_maxkeysize`): a longer one is
 * refused only when its write reaches LMDB, at the commit.
 */
export const LMDB_MAX_KEY_BYTES = 1978;

/** The highest character the key encoder escapes with a byte of its own, in a string shorter than 64. */
const HIGHEST_ESCAPED = 4;

function escapes(part: string): number {
  if (part.length >= 64) return 0;
  let count = 0;
  for (let i = 0; i < part.length; i++) if (part.charCodeAt(i) <= HIGHEST_ESCAPED) count++;
  return count;
}

/**
 * A key's encoded size as lmdb's key encoder (ordered-binary) writes it: a string is its UTF-8
 * bytes, with a marker byte before one that is empty or starts below character 28 and, when it is
 * short, an escape byte per character up to 4; a number in a key is 9 bytes; parts are separated
 * by one byte.
 */
export function encodedKeySize(parts: ReadonlyArray<string | number>): number {
  let size = parts.length - 1;
  for (const part of parts) {
    if (typeof part === 'number') {
      size += 9;
      continue;
    }
    const marker = part.length === 0 || part.charCodeAt(0) < 28 ? 1 : 0;
    size += Buffer.byteLength(part) + marker + escapes(part);
  }
  return size;
}

/**
 * Whether the key `[...prefix, id]` fits in LMDB whatever its characters: counted at 4 bytes per
 * UTF-16 unit (3 of UTF-8 and an escape), 9 per number and 2 per part (marker and separator),
 * never less than `encodedKeySize`. Nearly every key is far below the bound, so its exact size,
 * which walks every character, is measured only when this cannot tell.
 */
export function surelyFits(prefix: readonly string[], id: string | number): boolean {
  let bound = typeof id === 'number' ? 9 : 4 * id.length + 2;
  for (const part of prefix) bound += 4 * part.length + 2;
  return bound <= LMDB_MAX_KEY_BYTES;
}
