/**
 * Tolerant readers for provider JSON on the hot path: stream events and answers are read
 * field by field without building validated copies, and an unexpected shape reads as absent
 * instead of throwing mid-stream.
 */
export type JsonObject = Record<string, unknown>;

const NONE: readonly unknown[] = [];

export function asObject(value: unknown): JsonObject | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
}

export function asArray(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : NONE;
}

export function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function asCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Where a part's own text is: its text, a tool result's content or output, a call's arguments. */
const TEXT_KEYS = ['text', 'content', 'output', 'arguments'];

/**
 * Whether `textOf` reads a part's field as its text: each of `TEXT_KEYS` given as a string. A part
 * giving several is read for all of them, since a server may read any one.
 */
export function isTextKey(p: JsonObject, key: string): boolean {
  return TEXT_KEYS.includes(key) && typeof p[key] === 'string';
}

/** Where a part without text of its own lists parts whose text `textOf` reads: a message's content, a tool call's output. */
export const TEXT_NESTS = ['content', 'output'];

/**
 * The text of a message content: a string, or the text of each part in a list of parts, and of
 * the parts a part lists (a tool result's content, a call's output), beside any text of its own.
 */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  let out = '';
  for (const part of asArray(content)) {
    if (typeof part === 'string') out += part;
    const p = asObject(part);
    if (!p) continue;
    for (const key of TEXT_KEYS) {
      const text = p[key];
      if (typeof text === 'string') out += text;
    }
    for (const nest of TEXT_NESTS) out += textOf(asArray(p[nest]));
  }
  return out;
}

/** Removes a query string: adapters classify on the path alone. */
export function pathOnly(path: string): string {
  const q = path.indexOf('?');
  return q < 0 ? path : path.slice(0, q);
}
