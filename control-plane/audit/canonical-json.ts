/**
 * JSON with object keys sorted at every level, so equal records always hash equally. Records
 * already chained were hashed over this text: its output must never change.
 */
export function canonicalJson(value: unknown): string {
  return decoder.decode(canonicalJsonBytes(value));
}

/**
 * The UTF-8 bytes of `canonicalJson(value)`, written into one buffer that every call reuses: no
 * string per member, no array per sort (a string built by concatenation cost twelve times the
 * text's size in garbage). Valid until the next call: hash or copy them at once.
 */
export function canonicalJsonBytes(value: unknown): Uint8Array {
  // A rare large record does not leave its buffer held for good.
  if (out.bytes.length > RETAINED_BYTES) out.bytes = Buffer.allocUnsafe(INITIAL_BYTES);
  out.length = 0;
  write(value);
  return out.bytes.subarray(0, out.length);
}

const INITIAL_BYTES = 4096;
const RETAINED_BYTES = 65_536;
const decoder = new TextDecoder();
const out = { bytes: Buffer.allocUnsafe(INITIAL_BYTES), length: 0 };

/** Above this many keys an object is sorted by `Array.prototype.sort`; below, in place. */
const INSERTION_SORT_MAX = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

function write(value: unknown): void {
  if (typeof value === 'string') return writeString(value);
  if (value === null || typeof value !== 'object') return writeText(JSON.stringify(value) ?? 'null');
  if (Array.isArray(value)) {
    writeByte(OPEN_ARRAY);
    for (let i = 0; i < value.length; i++) {
      if (i > 0) writeByte(COMMA);
      write(value[i]);
    }
    return writeByte(CLOSE_ARRAY);
  }
  const record = value as Record<string, unknown>;
  const keys = sortKeys(Object.keys(record));
  writeByte(OPEN_OBJECT);
  let first = true;
  for (const key of keys) {
    const child = record[key];
    if (child === undefined) continue;
    if (!first) writeByte(COMMA);
    first = false;
    writeString(key);
    writeByte(COLON);
    write(child);
  }
  writeByte(CLOSE_OBJECT);
}

/** Sorted by UTF-16 code unit, as `Array.prototype.sort` and the text's first definition sort. */
function sortKeys(keys: string[]): string[] {
  if (keys.length > INSERTION_SORT_MAX) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    for (; j >= 0 && keys[j]! > key; j--) keys[j + 1] = keys[j]!;
    keys[j + 1] = key;
  }
  return keys;
}

function writeString(text: string): void {
  if (needsEscapes(text)) return writeText(JSON.stringify(text));
  writeByte(QUOTE);
  writeText(text);
  writeByte(QUOTE);
}

/** Whether `JSON.stringify` writes more than the text between quotes: a quote, backslash, control or surrogate. */
function needsEscapes(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x20 || unit === QUOTE || unit === BACKSLASH || (unit >= 0xd800 && unit < 0xe000)) return true;
  }
  return false;
}

function writeByte(byte: number): void {
  reserve(1);
  out.bytes[out.length++] = byte;
}

/**
 * The text's UTF-8: an ASCII text is its own code units, copied here; any other is encoded by
 * `Buffer#write` (a native call per text, which costs more than the copy for the short keys and
 * ids records are made of).
 */
function writeText(text: string): void {
  // At most 3 bytes per UTF-16 unit (a surrogate pair: 4 bytes for 2 units).
  reserve(3 * text.length);
  const bytes = out.bytes;
  let at = out.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) {
      out.length += bytes.write(text, out.length, 'utf8');
      return;
    }
    bytes[at++] = unit;
  }
  out.length = at;
}

function reserve(count: number): void {
  if (out.length + count <= out.bytes.length) return;
  const grown = Buffer.allocUnsafe(Math.max(2 * out.bytes.length, out.length + count));
  out.bytes.copy(grown, 0, 0, out.length);
  out.bytes = grown;
}
