import type { z } from 'zod';
import { SvcError, type FieldViolation } from './svc-error.ts';

/** Turns zod issues into field violations with dotted paths (`rules.0.action`). */
export function fieldViolations(error: z.ZodError): FieldViolation[] {
  return error.issues.map((issue) => ({
    field: issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)',
    description: issue.message,
  }));
}

/** Parses `input` with `schema`, or throws SVC-SYS-9002 naming every offending field. */
export function parseOrThrow<T extends z.ZodType>(schema: T, input: unknown, what = 'request'): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const violations = fieldViolations(result.error);
  const fields = violations.map((v) => v.field).join(', ');
  throw new SvcError(
    'SVC-SYS-9002',
    `invalid ${what}: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
    { fields },
    violations,
  );
}
