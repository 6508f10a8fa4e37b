import type { z } from 'zod';
import { SvcError, type FieldViolation } from './svc-error.ts';

/** Turns zod issues into field violations with dotted paths (`rules.0.action`). */
export function fieldViolations(error: z.ZodError): FieldViolation[] {
  return error.issues.map((issue) => ({
    field: issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)',
    description: issue.message,
  }));
}

/** A custom zod issue's `params` that make the refusal 413 SVC-SYS-9009 rather than 400. */
export const TOO_LARGE = { svc: 'SVC-SYS-9009' } as const;

/**
 * Parses `input` with `schema`, or throws SVC-SYS-9002 naming every offending field; SVC-SYS-9009
 * naming those too large when an issue says so (`params: TOO_LARGE`).
 */
export function parseOrThrow<T extends z.ZodType>(schema: T, input: unknown, what = 'request'): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const large = result.error.issues.some((issue) => issue.code === 'custom' && issue.params?.svc === TOO_LARGE.svc);
  const violations = fieldViolations(result.error);
  const fields = violations.map((v) => v.field).join(', ');
  throw new SvcError(
    large ? 'SVC-SYS-9009' : 'SVC-SYS-9002',
    `${large ? 'payload too large' : `invalid ${what}`}: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
    { fields },
    violations,
  );
}

/** SVC-SYS-9009: free-form JSON holding more values than `limit`, naming the field. */
export function tooManyValues(field: string, limit: number): SvcError {
  const description = `holds more than ${limit} values`;
  return new SvcError('SVC-SYS-9009', `payload too large: ${field} ${description}`, { field, limit }, [
    { field, description },
  ]);
}
