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

/** The text of a message content: a string, or the `text` of each part in a list of parts. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  let out = '';
  for (const part of asArray(content)) {
    if (typeof part === 'string') out += part;
    const p = asObject(part);
    if (!p) continue;
    const text = asString(p.text) ?? asString(p.content) ?? asString(p.output) ?? asString(p.arguments);
    if (text !== undefined) out += text;
    else if (Array.isArray(p.content)) out += textOf(p.content);
  }
  return out;
}

/** Removes a query string: adapters classify on the path alone. */
export function pathOnly(path: string): string {
  const q = path.indexOf('?');
  return q < 0 ? path : path.slice(0, q);
}
