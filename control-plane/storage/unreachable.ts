import { SvcError } from '../../core/errors/index.ts';

/** What a 503 asks the caller to wait before retrying. */
export const RETRY_AFTER_SECONDS = 5;

/** Socket failures: the server is down, restarting, or the network between is cut. */
const NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * The driver's own words for a lost or unobtainable connection: these errors carry no code (a
 * pool that cannot connect in time, a connection that ended under a query).
 */
const LOST_CONNECTION =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

/**
 * Whether a storage operation failed because the database could not be reached, rather than
 * because of what it was asked: such a request is answered 503 (SVC-SYS-9001, retry later). Its
 * transaction did not commit, unless the connection died during the commit itself: a retry is then
 * safe where the API makes it so (event ids). SQLSTATE class 08 is a connection
 * exception; 57P01 to 57P03 a server shutting down or not yet accepting connections.
 */
export function isStorageUnreachable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code) || /^57P0[1-3]$/.test(code)))
    return true;
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && LOST_CONNECTION.test(message);
}

/** The answer every surface gives for a request that failed on an unreachable store, or undefined. */
export function storageUnavailable(error: unknown): SvcError | undefined {
  if (!isStorageUnreachable(error)) return undefined;
  return new SvcError('SVC-SYS-9001', 'storage unavailable, retry later', { retry_after_seconds: RETRY_AFTER_SECONDS });
}
