import { ENVELOPE_HEADER } from '../../envelopes/index.ts';
import type { ProxiedRequest } from '../../listener/index.ts';
import type { Operation, ProviderAdapter } from '../../providers/index.ts';
import type { UpstreamResponse } from '../../upstream/index.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import { sendProviderRefusal } from '../provider-refusal.ts';
import { upstreamSignal } from '../upstream-signal.ts';
import { decideCall } from './decide-call.ts';
import { forwardCall } from './forward-call.ts';
import { meterStream } from './meter-stream.ts';
import { meterWhole, relayProviderRefusal } from './meter-whole.ts';
import { readCall } from './read-call.ts';
import { isRefused, type Refusal } from './refusal.ts';
import { holdWorstCase, settleUnfinished } from './settlement.ts';

/**
 * The governed path of one provider call, as one pipeline: read → decide → forward → meter →
 * settle → record. Each step hands its result to the next or a refusal, answered in the
 * provider's own error format. Every call that may have reached the provider is charged and
 * recorded, also when its client went away or the connection failed: at its real usage when it
 * can still be read, else at its worst case (docs/budgets.md).
 */
export async function governLlmCall(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  adapter: ProviderAdapter,
  op: Operation,
): Promise<void> {
  const answer = (refusal: Refusal, model: string) => {
    deps.metrics.requests.inc({ provider: adapter.id, model, decision: refusal.decision });
    sendProviderRefusal(req.clientRes, adapter, refusal.code, refusal.message, req.id, refusal.envelopeId);
  };
  const read = await readCall(deps, req, adapter, op);
  if (isRefused(read)) return answer(read, 'unparsed');
  const model = deps.metrics.models.label(read.parsed.model);
  const call = await decideCall(deps, req, adapter, op, read);
  if (isRefused(call)) return answer(call, model);

  // Made as the request goes upstream: a client gone already has the call's worst case held at once.
  const upstream = upstreamSignal(req.signal, deps.abortDrainMs, () => holdWorstCase(call, 'client_gone', call.seen()));
  try {
    const response = await forwardCall(deps, call, read, upstream.signal);
    if (isRefused(response)) return answer(response, model);
    if (response.statusCode < 400) deps.metrics.models.served(read.parsed.model);
    deps.metrics.requests.inc({
      provider: adapter.id,
      model: deps.metrics.models.label(read.parsed.model),
      decision: 'allowed',
    });
    response.headers[ENVELOPE_HEADER] = call.envelope.envelopeId;
    if (response.statusCode >= 400) await relayProviderRefusal(deps, call, response);
    else if (call.parsed.stream && !answersWhole(response, op)) await meterStream(deps, call, response, upstream);
    else await meterWhole(deps, call, response);
  } finally {
    upstream.dispose();
    await settleUnfinished(deps, call);
  }
}

/**
 * Whether an answer to a stream request is one JSON document instead (a server that ignored the
 * stream flag): it is then read and judged as a whole answer, never passed on as stream bytes no
 * event was read from. Gemini streams without `alt=sse` are JSON arrays, read as streams.
 */
function answersWhole(response: UpstreamResponse, op: Operation): boolean {
  const type = String(response.headers['content-type'] ?? '').toLowerCase();
  return op !== 'stream_generate' && /[/+]json\b/.test(type);
}
