import { MAX_PATH_ID_LENGTH } from '../../core/domain/index.ts';
import { documentationUrl, ERROR_CATALOGUE, isSvcError, SvcError, type SvcCode } from '../../core/errors/index.ts';

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
export function renderError(error: SvcError, requestId: string, now: Date): RenderedError {
  const spec = ERROR_CATALOGUE[error.code];
  const details: Record<string, unknown> = { ...error.details };
  if (error.fieldViolations.length > 0) details.field_violations = error.fieldViolations;
  const structured = {
    code: error.code,
    message: error.message,
    details,
    request_id: requestId,
    timestamp: now.toISOString(),
    documentation_url: documentationUrl(error.code),
  };
  const headers: Record<string, string> = { 'x-request-id': requestId };
  if (!spec.retryable) headers['x-should-retry'] = 'false';
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

/** Whatever was thrown, as an SvcError: unknown failures become SVC-SYS-9007 without leaking internals. */
export function asSvcError(error: unknown): SvcError {
  if (isSvcError(error)) return error;
  const e = error as { statusCode?: number; code?: string; message?: string };
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new SvcError('SVC-SYS-9002', 'invalid request: send the body as application/json', {}, [
      { field: '(body)', description: 'content-type must be application/json' },
    ]);
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new SvcError('SVC-SYS-9009', 'request body too large');
  if (e.code === 'FST_ERR_MAX_PARAM_LENGTH' || e.code === 'FST_ERR_BAD_URL') {
    const description =
      e.code === 'FST_ERR_BAD_URL'
        ? 'not a valid URL component'
        : `longer than ${MAX_PATH_ID_LENGTH} characters (the path id maximum)`;
    return new SvcError('SVC-SYS-9002', `invalid request: a path parameter is ${description}`, {}, [
      { field: '(path)', description },
    ]);
  }
  if (e.statusCode === 400 || e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || e.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new SvcError('SVC-SYS-9002', `invalid request: body is not valid JSON (${e.message ?? 'parse error'})`, {}, [
      { field: '(body)', description: 'not valid JSON' },
    ]);
  }
  return new SvcError('SVC-SYS-9007', 'internal error');
}
