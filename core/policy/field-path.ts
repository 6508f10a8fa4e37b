export type FieldReader = (context: Readonly<Record<string, unknown>>) => unknown;

/**
 * Compiles a dotted field path (`request.model`, `budget.percent_used`) into a reader.
 * A context may nest (`{ request: { model } }`) or carry the dotted key flat
 * (`{ 'request.model': ... }`, as gRPC attribute maps do); the flat key wins.
 * Only own properties are read, so `constructor` or `__proto__` never reach a prototype.
 * A missing field reads as `undefined`.
 */
export function compileFieldPath(path: string): FieldReader {
  const segments = path.split('.');
  if (segments.some((s) => s.length === 0)) throw new RangeError(`field path "${path}" has an empty segment`);
  if (segments.length === 1) return (context) => (Object.hasOwn(context, path) ? context[path] : undefined);
  return (context) => {
    if (Object.hasOwn(context, path)) return context[path];
    let current: unknown = context;
    for (const segment of segments) {
      if (current === null || typeof current !== 'object' || !Object.hasOwn(current, segment)) return undefined;
      current = (current as Record<string, unknown>)[segment];
    }
    return current;
  };
}
