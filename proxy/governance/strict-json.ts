const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

export type StrictJson = { ok: true; value: unknown } | { ok: false; reason: string };

/**
 * The first key that appears twice in one object of `text` (already known to be valid JSON),
 * compared after unescaping, so `"name"` and `"na\u006de"` are one key. JSON.parse keeps the
 * last of two; other parsers keep the first or refuse: such a body means different things to
 * the proxy and to a server.
 */
export function duplicateKey(text: string): string | undefined {
  /** One set of keys per open object; null for an open array. */
  const open: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let end = i + 1;
      let escaped = false;
      while (end < text.length) {
        const d = text.charCodeAt(end);
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          escaped = true;
          end += 2;
        } else {
          end++;
        }
      }
      const keys = open.at(-1);
      if (expectKey && keys) {
        const raw = text.slice(i + 1, end);
        const key = escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (keys.has(key)) return key;
        keys.add(key);
        expectKey = false;
      }
      i = end;
    } else if (c === OPEN_BRACE) {
      open.push(new Set());
      expectKey = true;
    } else if (c === OPEN_BRACKET) {
      open.push(null);
      expectKey = false;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      open.pop();
      expectKey = false;
    } else if (c === COMMA) {
      expectKey = open.at(-1) != null;
    }
  }
  return undefined;
}

/** JSON.parse, refusing as well any object with a key given twice. */
export function parseStrictJson(text: string): StrictJson {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, reason: `not JSON: ${(error as Error).message}` };
  }
  const twice = duplicateKey(text);
  if (twice !== undefined) return { ok: false, reason: `key "${twice}" appears twice in one object` };
  return { ok: true, value };
}
