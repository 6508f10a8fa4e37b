import { foldCase } from './case-fold.ts';

export type FieldReader = (context: Readonly<Record<string, unknown>>) => unknown;

/** The context field that holds a tool call's arguments as the agent sent them (MCP). */
const ARGUMENTS = 'arguments';

/**
 * Compiles a dotted field path (`request.model`, `budget.percent_used`) into a reader.
 * A context may nest (`{ request: { model } }`) or carry the dotted key flat
 * (`{ 'request.model': ... }`, as gRPC attribute maps do); the flat key wins.
 * Only own properties are read, so `constructor` or `__proto__` never reach a prototype.
 * A missing field reads as `undefined`.
 *
 * Below `arguments` keys are read without regard to case: a tool server may bind `Amount` to its
 * `amount` (Go's encoding/json does), so `arguments.amount` reads it. When several keys fold to
 * the segment (`amount` beside `Amount`: which one the tool takes is its parser's choice), the
 * field reads as the list of their values, which a deny meets when one of them does and an allow
 * only when all of them do.
 */
export function compileFieldPath(path: string): FieldReader {
  const segments = path.split('.');
  if (segments.some((s) => s.length === 0)) throw new RangeError(`field path "${path}" has an empty segment`);
  if (segments.length === 1) return (context) => (Object.hasOwn(context, path) ? context[path] : undefined);
  const folded = segments[0] === ARGUMENTS ? segments.map((s, i) => (i === 0 ? null : foldCase(s))) : null;
  return (context) => {
    if (Object.hasOwn(context, path)) return context[path];
    let current: unknown = context;
    for (let i = 0; i < segments.length; i++) {
      if (current === null || typeof current !== 'object') return undefined;
      const fold = folded?.[i];
      if (fold !== undefined && fold !== null && !Array.isArray(current)) {
        current = foldedMember(current as Record<string, unknown>, fold);
        continue;
      }
      const segment = segments[i] as string;
      if (!Object.hasOwn(current, segment)) return undefined;
      current = (current as Record<string, unknown>)[segment];
    }
    return current;
  };
}

/** The value of the one own key that folds to `fold`, the list of them when several do, or undefined. */
function foldedMember(object: Readonly<Record<string, unknown>>, fold: string): unknown {
  let found: unknown;
  let several: unknown[] | null = null;
  let count = 0;
  for (const key of Object.keys(object)) {
    if (foldCase(key) !== fold) continue;
    if (count === 1) several = [found];
    several?.push(object[key]);
    found = object[key];
    count++;
  }
  return several ?? found;
}
