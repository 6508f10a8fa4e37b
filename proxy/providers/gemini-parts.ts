import type { AdapterDeps } from './adapter.ts';
import { asArray, asObject, asString, textOf, type JsonObject } from './json-access.ts';
import { GEMINI_FUNCTION_KEYS, IMAGE_TOKENS, type NonTextAmounts } from './non-text-input.ts';

/** What a Gemini part that is not text holds back at most (non-text-input.ts). */
export function geminiAmounts(deps: AdapterDeps): NonTextAmounts {
  return { image: IMAGE_TOKENS.gemini, unknown: deps.serverContextTokens };
}

/**
 * A function call or result as the model reads it: its name, its arguments or response as JSON,
 * and any other field it gives (an id) as JSON too; its parts measured apart.
 */
function functionText(f: JsonObject): string {
  const { name, args, response, parts: _parts, ...rest } = f;
  const text = (asString(name) ?? '') + JSON.stringify(args ?? response ?? {});
  return Object.keys(rest).length > 0 ? text + JSON.stringify(rest) : text;
}

/**
 * A content's text as the model reads it: its text parts, and the functions it called and their
 * results, each in every spelling a part gives (Google reads one of them, the proxy cannot say which).
 */
export function partsText(parts: unknown): string {
  let out = textOf(parts);
  for (const part of asArray(parts)) {
    const p = asObject(part);
    if (p === undefined) continue;
    for (const key of GEMINI_FUNCTION_KEYS) {
      const f = asObject(p[key]);
      if (f !== undefined) out += functionText(f);
    }
  }
  return out;
}
