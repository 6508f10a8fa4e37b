import { ERROR_CATALOGUE, type ErrorSpec, type SvcCode } from './catalogue.ts';

/** One offending field of a request: `field` is a dotted path such as `limits.max_tokens`. */
export interface FieldViolation {
  field: string;
  description: string;
}

/**
 * An error as a value: a catalogue code, a message for people, and structured details.
 * Thrown by domain services, rendered by each transport from the catalogue.
 */
export class SvcError extends Error {
  readonly code: SvcCode;
  readonly details: Record<string, unknown>;
  readonly fieldViolations: readonly FieldViolation[];

  constructor(
    code: SvcCode,
    message: string,
    details: Record<string, unknown> = {},
    fieldViolations: readonly FieldViolation[] = [],
  ) {
    super(message);
    this.name = 'SvcError';
    this.code = code;
    this.details = details;
    this.fieldViolations = fieldViolations;
  }

  get spec(): ErrorSpec {
    return ERROR_CATALOGUE[this.code];
  }
}

export function isSvcError(value: unknown): value is SvcError {
  return value instanceof SvcError;
}
