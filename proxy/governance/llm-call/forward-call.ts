import type { IncomingHttpHeaders } from 'node:http';
import { isSvcError } from '../../../core/errors/index.ts';
import type { UpstreamResponse } from '../../upstream/index.ts';
import { appendFields } from '../append-fields.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import { mayHaveReachedProvider } from '../upstream-failure.ts';
import type { ReadCall } from './read-call.ts';
import { refusal, type Refusal } from './refusal.ts';
import { chargeWorstCase, release, type LlmCall } from './settlement.ts';

/** The client's headers for a governed call: the answer must arrive unencoded to be metered. */
export function governedHeaders(headers: IncomingHttpHeaders, length: number): IncomingHttpHeaders {
  return { ...headers, 'accept-encoding': 'identity', 'content-length': String(length) };
}

/**
 * Step 3, forward: the request as the adapter prepares it (usage asked for in streams) goes
 * upstream. A failure that may have reached the provider is charged at the worst case, one that
 * cannot have is released; the agent reads the code and its request id.
 */
export async function forwardCall(
  deps: GovernanceDeps,
  call: LlmCall,
  read: ReadCall,
  signal: AbortSignal,
): Promise<UpstreamResponse | Refusal> {
  const { req } = call;
  const prepared = call.adapter.prepareRequest(call.op, read.json);
  const body = !prepared.modified
    ? read.bytes
    : ((prepared.added && appendFields(read.bytes, prepared.added)) ?? Buffer.from(JSON.stringify(prepared.body)));
  call.hideStreamUsage = prepared.hideStreamUsage;
  call.sent = true;
  try {
    return await deps.upstream.request({
      url: req.targetUrl,
      method: req.method,
      headers: governedHeaders(read.headers, body.length),
      body,
      signal,
      provider: call.adapter.id,
      receivedAt: req.receivedAt,
    });
  } catch (error) {
    if (mayHaveReachedProvider(error))
      await chargeWorstCase(deps, call, req.signal.aborted ? 'client_gone' : 'upstream_failed');
    else release(call);
    const failure = isSvcError(error) ? error : undefined;
    // An unforeseen error's text stays in the log.
    if (failure === undefined) deps.logger.warn({ request_id: req.id, err: error }, 'upstream call failed');
    return refusal(
      'upstream_error',
      failure?.code ?? 'SVC-ADP-5001',
      failure?.message ?? 'the call could not be completed upstream; see the proxy log for this request id',
      call.envelope.envelopeId,
    );
  }
}
