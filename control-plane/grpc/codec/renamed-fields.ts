import { isSvcError, SvcError } from '../../../core/errors/index.ts';

/**
 * Runs `parse` (which validates a request mapped onto a canonical schema) and names the refused
 * fields as the gRPC request names them: `renames` maps a canonical path prefix onto the gRPC
 * one (`governance_context.token_limit` → `governance.token_budget`), and `prefix` is prepended
 * to every path (`policy.` for a policy given in a request's `policy` field).
 */
export function renamedFields<T>(renames: Record<string, string>, parse: () => T, prefix = ''): T {
  try {
    return parse();
  } catch (error) {
    if (!isSvcError(error) || error.fieldViolations.length === 0) throw error;
    const rename = (field: string) => {
      const match = Object.keys(renames)
        .filter((from) => field === from || field.startsWith(`${from}.`))
        .sort((a, b) => b.length - a.length)[0];
      const renamed = match === undefined ? field : renames[match] + field.slice(match.length);
      return field.startsWith('(') ? field : `${prefix}${renamed}`;
    };
    const violations = error.fieldViolations.map((v) => ({ ...v, field: rename(v.field) }));
    const fields = violations.map((v) => v.field).join(', ');
    throw new SvcError(
      error.code,
      `invalid request: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
      { ...error.details, ...(error.details.fields === undefined ? {} : { fields }) },
      violations,
    );
  }
}
