import type { ServerResponse } from 'node:http';
import type { SvcCode } from '../../core/errors/index.ts';
import type { ProviderAdapter } from '../providers/index.ts';
import { ENVELOPE_HEADER } from '../envelopes/index.ts';

/** Answers in the provider's own error format (the agent's SDK raises it; terminal codes carry x-should-retry: false). */
export function sendProviderRefusal(
  res: ServerResponse,
  adapter: ProviderAdapter,
  code: SvcCode,
  message: string,
  requestId: string,
  envelopeId: string | null,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const reply = adapter.errorResponse(code, message);
  const headers: Record<string, string | number> = {
    ...reply.headers,
    'content-length': Buffer.byteLength(reply.body),
    'x-request-id': requestId,
  };
  if (envelopeId !== null) headers[ENVELOPE_HEADER] = envelopeId;
  res.writeHead(reply.status, headers);
  res.end(reply.body);
}
