import { isSvcError } from '../../core/errors/index.ts';

/** Failures of the connection itself: no byte of the request can have reached the provider. */
const BEFORE_SENDING = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
]);
const TLS_FAILURE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_)/;

/**
 * Whether an upstream failure may have come after the request reached the provider: a reset
 * or a timeout while waiting for the answer may follow a generation the provider bills, so the
 * call is charged. Only failures to connect (refused, unresolvable, TLS rejected) are known
 * to have sent nothing.
 */
export function mayHaveReachedProvider(error: unknown): boolean {
  const cause = isSvcError(error) ? error.details.cause : undefined;
  if (typeof cause !== 'string') return true;
  return !BEFORE_SENDING.has(cause) && !TLS_FAILURE.test(cause);
}
