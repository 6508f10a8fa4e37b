import type { IncomingHttpHeaders } from 'node:http';
import { isSvcError } from '../../../core/errors/index.ts';
import type { ProxiedRequest } from '../../listener/index.ts';
import type { Operation, ParsedRequest, ProviderAdapter } from '../../providers/index.ts';
import { decodeBody, decodedHeaders } from '../decode-body.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import { parseBounded, type InputTokens } from '../input-tokens.ts';
import { parseJsonBody, readRequestBody } from '../read-body.ts';
import { refusal, type Refusal } from './refusal.ts';

/** The request as the later steps govern it. */
export interface ReadCall {
  /** The body as sent on: the decoded text in UTF-8. */
  bytes: Buffer;
  headers: IncomingHttpHeaders;
  json: unknown;
  /** Parsed with the input tokens' upper bound (`input.bound`); `input` counts exactly when needed. */
  parsed: ParsedRequest;
  input: InputTokens;
}

/**
 * Step 1, read: the body within its bound, governed as the provider will read it (codings undone,
 * text decoded) and parsed by the provider's adapter. What cannot be read is refused.
 */
export async function readCall(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  adapter: ProviderAdapter,
  op: Operation,
): Promise<ReadCall | Refusal> {
  try {
    const received = await readRequestBody(req, deps.bodyLimitBytes);
    const decoded = await decodeBody(received, req.headers, deps.bodyLimitBytes);
    const json = parseJsonBody(decoded.text);
    const { parsed, input } = parseBounded(deps.tokens, adapter, op, json, req.targetUrl.pathname);
    return { bytes: decoded.utf8, headers: decodedHeaders(req.headers, decoded), json, parsed, input };
  } catch (error) {
    if (!isSvcError(error)) throw error;
    return refusal('invalid', error.code, error.message, null);
  }
}
