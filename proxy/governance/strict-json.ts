const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

export type StrictJson =
  { ok: true; value: unknown } | { ok: false; reason: string; fault: 'syntax' | 'duplicate' | 'depth' };

interface Scan {
  /** The first key given twice in one object. */
  duplicate?: string;
  /** Nesting went past the depth asked for. */
  tooDeep?: boolean;
}

/**
 * A key as a parser that ignores case reads it: Go's encoding/json (MCP servers, Ollama and other
 * OpenAI-compatible servers) matches a field by any spelling that folds to its name, the Kelvin
 * sign and the long s included, and keeps the last match.
 */
export function foldKey(key: string): string {
  // Most keys are lower-case ASCII, which folding leaves as it is: no copies made for them.
  return LOWER_ASCII.test(key) ? key : key.toUpperCase().toLowerCase();
}

const LOWER_ASCII = /^[a-z0-9_\-.$]*$/;

/**
 * The first key that appears twice in one object of `text` (already known to be valid JSON),
 * compared after unescaping and folding case, so `"name"`, `"na\u006de"` and `"Name"` are one
 * key. JSON.parse keeps the last of two exact ones; other parsers keep the first, refuse, or take
 * `"Name"` for `"name"`: such a body means different things to the proxy and to a server.
 */
export function duplicateKey(text: string): string | undefined {
  return scan(text, Number.POSITIVE_INFINITY).duplicate;
}

/** One pass over valid JSON text for repeated keys and nesting past `maxDepth`. */
function scan(text: string, maxDepth: number): Scan {
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
        const key = foldKey(escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : raw);
        if (keys.has(key)) return { duplicate: key };
        keys.add(key);
        expectKey = false;
      }
      i = end;
    } else if (c === OPEN_BRACE) {
      open.push(new Set());
      expectKey = true;
      if (open.length > maxDepth) return { tooDeep: true };
    } else if (c === OPEN_BRACKET) {
      open.push(null);
      expectKey = false;
      if (open.length > maxDepth) return { tooDeep: true };
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      open.pop();
      expectKey = false;
    } else if (c === COMMA) {
      expectKey = open.at(-1) != null;
    }
  }
  return {};
}

/**
 * JSON.parse, refusing as well any object with a key given twice, and (with `maxDepth`) arrays
 * and objects nested deeper than that: readers that walk a value recursively must not be handed
 * one that exhausts their stack.
 */
export function parseStrictJson(text: string, options: { maxDepth?: number } = {}): StrictJson {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, reason: `not JSON: ${(error as Error).message}`, fault: 'syntax' };
  }
  const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY;
  const found = scan(text, maxDepth);
  if (found.tooDeep === true) return { ok: false, reason: `nested deeper than ${maxDepth} levels`, fault: 'depth' };
  if (found.duplicate !== undefined)
    return {
      ok: false,
      reason: `key "${found.duplicate}" appears twice in one object (spellings that differ in case count as one)`,
      fault: 'duplicate',
    };
  return { ok: true, value };
}
