import { isSvcError } from '../../core/errors/index.ts';

/**
 * SQLSTATE classes of a statement PostgreSQL refused for the values it was given: 22 (data
 * exception: out of range, malformed text) and 54 (program limit exceeded: an index row or a
 * value past what the server stores).
 */
const REFUSED_VALUE = /^(22|54)[0-9A-Z]{3}$/;

/**
 * Why a transaction failed on what it was asked to store, such that running it again cannot
 * succeed: the SVC code of a terminal SvcError, or the SQLSTATE of a value PostgreSQL refused.
 * Undefined for any other failure (a lost race, an unreachable store), which may pass.
 */
export function refusedValue(error: unknown): string | undefined {
  if (isSvcError(error)) return error.spec.retryable ? undefined : error.code;
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && REFUSED_VALUE.test(code) ? `SQLSTATE ${code}` : undefined;
}
