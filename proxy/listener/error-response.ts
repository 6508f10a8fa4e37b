import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from './node-http.ts';
import type { z } from 'zod';
import { documentationUrl, isSvcError, SvcError, type ErrorBodySchema } from '../../core/errors/index.ts';

type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** The structured error body of spec 7.1; `documentation_url` under `documentationBase`. */
export function errorBody(error: SvcError, requestId: string, documentationBase: string): ErrorBody {
  return {
    error: {
      code: error.code,
      message: error.message,
      details: error.details,
      request_id: requestId,
      timestamp: new Date().toISOString(),
      documentation_url: documentationUrl(documentationBase, error.code),
    },
  };
}

/**
 * Anything a handler throws that is not an SvcError failed this request inside the proxy. The
 * agent gets a fixed message with the code and its request id; the thrown text (which may hold
 * an upstream URL, a path or a key) goes only to the log line of that request id.
 */
export function asSvcError(error: unknown): SvcError {
  if (isSvcError(error)) return error;
  return new SvcError('SVC-ADP-5001', 'the proxy failed to complete the request; see its log for this request id');
}

/** Answers with the error, or cuts the response when its headers are already on the wire. */
export function sendError(res: ServerResponse, error: SvcError, requestId: string, documentationBase: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorBody(error, requestId, documentationBase));
  res.writeHead(error.spec.http, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-request-id': requestId,
  });
  res.end(body);
}

/** The same answer written on a raw socket, for CONNECT requests refused before any HTTP exchange. */
export function rawErrorResponse(error: SvcError, requestId: string, documentationBase: string): string {
  const body = JSON.stringify(errorBody(error, requestId, documentationBase));
  return `HTTP/1.1 ${error.spec.http} ${STATUS_CODES[error.spec.http] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}
