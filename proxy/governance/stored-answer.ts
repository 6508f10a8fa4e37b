import { isSvcError, type SvcCode } from '../../core/errors/index.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import { JSON_LINES_SHAPES, type ProviderAdapter, type StoredShape } from '../providers/index.ts';
import { relayResponse, type UpstreamResponse } from '../upstream/index.ts';
import { decodedHeaders, headersWithout } from './decode-body.ts';
import { envelopeFor } from './envelope-for.ts';
import { awaitResumed, endedRefusal } from './await-resumed.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { relayWhole } from './llm-call/meter-whole.ts';
import { sendProviderRefusal } from './provider-refusal.ts';
import { readAnswer } from './read-answer.ts';
import { checkToolCall, refused, toolContext } from './tool-calls.ts';

/** A read sends no body: the fields that would describe one are left out. */
const BODY_FIELDS = ['content-length', 'transfer-encoding'];

/**
 * Answers the provider stored, read back (OpenAI's `GET /v1/responses/{id}`, stored chat
 * completions, conversation items; an Anthropic message batch's results, as JSON Lines): the
 * model's output again, which may hold a tool call refused
 * when it was generated. Each tool call it holds is judged as `tool:<name>` (source `stored`)
 * against the policies of now, without an approval wait: a refused one refuses the read with
 * its violation published, and nothing of the answer reaches the agent. What cannot be judged
 * (an answer over the bound, unreadable, or a resumed stream, which is not JSON) is withheld.
 * Nothing is generated, so nothing is charged.
 */
export async function governStoredAnswer(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  adapter: ProviderAdapter,
  shape: StoredShape,
): Promise<void> {
  const refuse = (code: SvcCode, message: string, envelopeId: string | null) =>
    sendProviderRefusal(req.clientRes, adapter, code, message, req.id, envelopeId);
  const envelope = envelopeFor(deps, req.headers);
  if (isSvcError(envelope)) {
    refuse(envelope.code, envelope.message, null);
    return;
  }
  // Held while the envelope or the sidecar is paused, as a model call is: a read carries no body.
  const stopped = endedRefusal(envelope) ?? (await awaitResumed(deps, req, envelope, 0));
  if (stopped !== null) {
    refuse(stopped.code, stopped.message, envelope.envelopeId);
    return;
  }
  // Asked for unencoded, as a call's answer is; a body, which a read has no use for, is not sent.
  const headers = headersWithout(req.headers, BODY_FIELDS);
  headers['accept-encoding'] = 'identity';
  let response: UpstreamResponse;
  try {
    response = await deps.upstream.request({
      url: req.targetUrl,
      method: req.method,
      headers,
      body: null,
      signal: req.signal,
      provider: adapter.id,
      receivedAt: req.receivedAt,
    });
  } catch (error) {
    // An unforeseen error's text stays in the log.
    if (!isSvcError(error)) deps.logger.warn({ request_id: req.id, err: error }, 'stored answer read failed');
    refuse(
      isSvcError(error) ? error.code : 'SVC-ADP-5001',
      isSvcError(error) ? error.message : 'the stored answer could not be read upstream; see the proxy log',
      envelope.envelopeId,
    );
    return;
  }
  // A refusal holds no answer of the model's.
  if (response.statusCode >= 400) {
    await relayResponse(req.clientRes, response);
    return;
  }
  // Over the bound, cut, undecodable or not JSON: nothing of it can be judged.
  const read = await readAnswer(response, deps.responseLimitBytes, 'the stored answer', JSON_LINES_SHAPES.has(shape));
  if (!read.ok) {
    refuse(
      read.tooLarge ? 'SVC-ADP-5005' : 'SVC-ADP-5001',
      `${read.message}; its tool calls cannot be judged, so it is withheld`,
      envelope.envelopeId,
    );
    return;
  }
  const { answer, decoded } = read;
  const calls = adapter.storedToolCalls?.(shape, answer);
  if (calls === undefined) {
    refuse('SVC-ADP-5003', `${adapter.id} has no reader for stored answers, so it is withheld`, envelope.envelopeId);
    return;
  }
  const context = {
    provider: adapter.id,
    adapter_type: adapter.id,
    tenant_id: deps.tenantId,
    workflow_id: deps.workflows.of(envelope.budgetId),
    operation: 'stored',
    host: req.targetUrl.hostname,
    envelope_id: envelope.envelopeId,
    execution_id: envelope.executionId,
    budget_id: envelope.budgetId,
  };
  for (const call of calls) {
    const action = `tool:${call.name}`;
    const verdict = checkToolCall(deps, action, toolContext(call, 'stored', context));
    if (verdict.allowed) continue;
    refused(deps, envelope, action, verdict);
    refuse(verdict.code, verdict.message, envelope.envelopeId);
    return;
  }
  relayWhole(req, response, decoded.utf8, decodedHeaders(response.headers, decoded));
}
