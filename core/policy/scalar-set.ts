export type Scalar = string | number | boolean | null;

export function isScalar(value: unknown): value is Scalar {
  return (
    value === null ||
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value))
  );
}

/**
 * Membership test over a fixed list of scalars, built once. Context values often arrive as
 * strings (gRPC attribute maps, HTTP headers), so `"5"` is a member of `[5]`, `"true"` of
 * `[true]`, and `5` of `["5"]`.
 */
export function scalarMembership(values: readonly Scalar[]): (actual: unknown) => boolean {
  const set = new Set<unknown>(values);
  const hasNumbers = values.some((v) => typeof v === 'number');
  const hasBooleans = values.some((v) => typeof v === 'boolean');
  const hasStrings = values.some((v) => typeof v === 'string');
  return (actual) => {
    if (set.has(actual)) return true;
    if (typeof actual === 'string') {
      if (hasNumbers && actual.trim() !== '' && set.has(Number(actual))) return true;
      return hasBooleans && (actual === 'true' || actual === 'false') && set.has(actual === 'true');
    }
    return hasStrings && (typeof actual === 'number' || typeof actual === 'boolean') && set.has(String(actual));
  };
}
