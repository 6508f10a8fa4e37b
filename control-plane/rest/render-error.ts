import { MAX_PATH_ID_LENGTH, toRestErrorDetails } from '../../core/domain/index.ts';
import { documentationUrl, ERROR_CATALOGUE, isSvcError, SvcError, type SvcCode } from '../../core/errors/index.ts';
import { RETRY_AFTER_SECONDS, storageUnavailable } from '../storage/unreachable.ts';

export interface RenderedError {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string>;
}

const POLICY_BODY: ReadonlySet<SvcCode> = new Set(['SVC-POL-2001', 'SVC-POL-2004']);

function str(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value);
}

/**
 * One renderer for every REST error: the structured error of spec 7.1 under `error`, and for a
 * policy denial (403) or a budget refusal (422) the PolicyViolation or BudgetError fields of spec
 * 2.1 at the top level beside it, so clients of either contract read what they expect.
 */
export function renderError(error: SvcError, requestId: string, now: Date, documentationBase: string): RenderedError {
  const spec = ERROR_CATALOGUE[error.code];
  const details = toRestErrorDetails(error.details);
  if (error.fieldViolations.length > 0) details.field_violations = error.fieldViolations;
  const structured = {
    code: error.code,
    message: error.message,
    details,
    request_id: requestId,
    timestamp: now.toISOString(),
    documentation_url: documentationUrl(documentationBase, error.code),
  };
  const headers: Record<string, string> = { 'x-request-id': requestId };
  if (!spec.retryable) headers['x-should-retry'] = 'false';
  if (spec.http === 503 || spec.http === 429) {
    const asked = error.details.retry_after_seconds;
    headers['retry-after'] = String(typeof asked === 'number' && asked > 0 ? Math.ceil(asked) : RETRY_AFTER_SECONDS);
  }
  let body: Record<string, unknown> = { error: structured };
  if (POLICY_BODY.has(error.code)) {
    body = {
      code: error.code,
      policy_id: str(error.details.policy_id),
      message: error.message,
      denied_action: str(error.details.denied_action),
      ...body,
    };
  } else if (spec.http === 422 && error.code.startsWith('SVC-BUD-')) {
    body = {
      code: error.code,
      budget_id: str(error.details.budget_id),
      current_usage: Number(error.details.current_usage ?? 0),
      limit: Number(error.details.limit ?? 0),
      message: error.message,
      ...body,
    };
  }
  return { status: spec.http, body, headers };
}

const INVALID_BODY = (description: string, message: string) =>
  new SvcError('SVC-SYS-9002', `invalid request: ${message}`, {}, [{ field: '(body)', description }]);

/**
 * What fastify's own refusals mean, each with a message of ours: their texts are fixed today, but
 * an error's text is never what decides what a caller reads.
 */
const FRAMEWORK_ERRORS: Record<string, () => SvcError> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    INVALID_BODY('content-type must be application/json', 'send the body as application/json'),
  FST_ERR_CTP_BODY_TOO_LARGE: () => new SvcError('SVC-SYS-9009', 'request body too large'),
  FST_ERR_CTP_INVALID_JSON_BODY: () => INVALID_BODY('not valid JSON', 'body is not valid JSON'),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => INVALID_BODY('not valid JSON', 'body is not valid JSON (empty)'),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () =>
    INVALID_BODY('does not match Content-Length', 'body size does not match Content-Length'),
  FST_ERR_BAD_URL: () =>
    new SvcError('SVC-SYS-9002', 'invalid request: a path parameter is not a valid URL component', {}, [
      { field: '(path)', description: 'not a valid URL component' },
    ]),
  FST_ERR_MAX_PARAM_LENGTH: () => {
    const description = `longer than ${MAX_PATH_ID_LENGTH} characters (the path id maximum)`;
    return new SvcError('SVC-SYS-9002', `invalid request: a path parameter is ${description}`, {}, [
      { field: '(path)', description },
    ]);
  },
};

/**
 * Whatever was thrown, as an SvcError. An SvcError says what it means to say; anything else
 * becomes a fixed message: a thrown Error's text (a path, a stack, a secret in a URL) never
 * reaches the caller; the error handler logs it under the request id.
 */
export function asSvcError(error: unknown): SvcError {
  if (isSvcError(error)) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && Object.hasOwn(FRAMEWORK_ERRORS, code)) return FRAMEWORK_ERRORS[code]!();
  if (typeof code === 'string' && code.startsWith('FST_') && (error as { statusCode?: unknown }).statusCode === 400)
    return new SvcError('SVC-SYS-9002', 'invalid request');
  const unavailable = storageUnavailable(error);
  if (unavailable !== undefined) return unavailable;
  return new SvcError('SVC-SYS-9007', 'internal error');
}
