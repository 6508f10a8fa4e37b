import type { IncomingHttpHeaders } from 'node:http';
import { isSvcError, type SvcCode } from '../../core/errors/index.ts';
import { ZERO, isRefusal, type Reservation } from '../enforcement/index.ts';
import { ENVELOPE_HEADER, type LocalEnvelope } from '../envelopes/index.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import type { Operation, ParsedRequest, ProviderAdapter, ResponseReading } from '../providers/index.ts';
import type { UpstreamResponse } from '../upstream/index.ts';
import { estimate, price, type PricedUsage } from './call-pricing.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { sendProviderRefusal } from './provider-refusal.ts';
import { parseJsonBody, readBody } from './read-body.ts';
import { relayMeteredStream } from './metered-stream.ts';
import { governToolCall, refused } from './tool-calls.ts';

/** One governed LLM call as the later stages see it. */
export interface LlmCall {
  req: ProxiedRequest;
  adapter: ProviderAdapter;
  op: Operation;
  parsed: ParsedRequest;
  envelope: LocalEnvelope;
  reservation: Reservation;
  /** Policy context shared by the call's own and its tool-call evaluations. */
  context: Record<string, unknown>;
  hideStreamUsage: boolean;
}

/**
 * The governed path of one provider call: parse, choose the envelope, evaluate `llm:<model>`,
 * reserve from the budget lease, forward, meter the answer (whole or as it streams), settle,
 * and record the events. Refusals answer in the provider's own error format.
 */
export async function governLlmCall(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  adapter: ProviderAdapter,
  op: Operation,
): Promise<void> {
  const refuse = (code: SvcCode, message: string, envelopeId: string | null) =>
    sendProviderRefusal(req.clientRes, adapter, code, message, req.id, envelopeId);
  let bytes: Buffer;
  let json: unknown;
  let parsed: ParsedRequest;
  try {
    bytes = await readBody(req.body, deps.bodyLimitBytes);
    json = parseJsonBody(bytes);
    parsed = adapter.parseRequest(op, json, req.targetUrl.pathname);
  } catch (error) {
    if (!isSvcError(error)) throw error;
    deps.metrics.requests.inc({ provider: adapter.id, model: 'unparsed', decision: 'invalid' });
    refuse(error.code, error.message, null);
    return;
  }
  const model = deps.metrics.models.label(parsed.model);
  const count = (decision: string) => deps.metrics.requests.inc({ provider: adapter.id, model, decision });

  const { envelope, opened } = deps.envelopes.resolve(req.headers);
  if (opened) void deps.recorder.opened(envelope);
  if (envelope.ending !== null) {
    count('terminated');
    refuse(
      'SVC-ENV-1003',
      `envelope ${envelope.envelopeId} already ended (${envelope.ending.status}): ${envelope.ending.reason}`,
      envelope.envelopeId,
    );
    return;
  }

  const context: Record<string, unknown> = {
    model: parsed.model,
    model_name: parsed.model,
    provider: adapter.id,
    operation: op,
    stream: parsed.stream,
    host: req.targetUrl.hostname,
    envelope_id: envelope.envelopeId,
    execution_id: envelope.executionId,
    budget_id: envelope.budgetId,
    estimated_input_tokens: parsed.estimatedInputTokens,
    max_output_tokens: parsed.maxOutputTokens,
    declared_tools: parsed.declaredTools,
  };
  const action = `llm:${parsed.model}`;
  const verdict = deps.gate.check(action, context);
  if (!verdict.allowed) {
    count('denied');
    refused(deps, envelope, action, verdict);
    refuse(verdict.code, verdict.message, envelope.envelopeId);
    return;
  }

  const lease = await deps.leases.lease(envelope.budgetId);
  const { most, least } = estimate(deps.prices, parsed);
  const reservation = lease.reserve(most, least);
  if (isRefusal(reservation)) {
    count('budget_exceeded');
    refuse(reservation.code, reservation.message, envelope.envelopeId);
    return;
  }

  try {
    await forwardAndMeter(
      deps,
      { req, adapter, op, parsed, envelope, reservation, context, hideStreamUsage: false },
      json,
      bytes,
      count,
    );
  } finally {
    // Whatever ended the call early (client gone, upstream failure), its hold goes back to the
    // lease; a call already settled ignores this.
    reservation.settle(ZERO);
  }
}

async function forwardAndMeter(
  deps: GovernanceDeps,
  call: LlmCall,
  json: unknown,
  bytes: Buffer,
  count: (decision: string) => void,
): Promise<void> {
  const { req, adapter, op, envelope } = call;
  const prepared = adapter.prepareRequest(op, json);
  const body = prepared.modified ? Buffer.from(JSON.stringify(prepared.body)) : bytes;
  call.hideStreamUsage = prepared.hideStreamUsage;
  let response: UpstreamResponse;
  try {
    response = await deps.upstream.request({
      url: req.targetUrl,
      method: req.method,
      headers: governedHeaders(req.headers, body.length),
      body,
      signal: req.signal,
      provider: adapter.id,
      receivedAt: req.receivedAt,
    });
  } catch (error) {
    count('upstream_error');
    const failure = isSvcError(error) ? error : undefined;
    // An unforeseen error's text stays in the log; the agent reads the code and its request id.
    if (failure === undefined) deps.logger.warn({ request_id: req.id, err: error }, 'upstream call failed');
    sendProviderRefusal(
      req.clientRes,
      adapter,
      failure?.code ?? 'SVC-ADP-5001',
      failure?.message ?? 'the call could not be completed upstream; see the proxy log for this request id',
      req.id,
      envelope.envelopeId,
    );
    return;
  }
  count('allowed');
  response.headers[ENVELOPE_HEADER] = envelope.envelopeId;
  if (response.statusCode >= 400) {
    // The provider refused the call itself: nothing was generated, so nothing is charged.
    relayWhole(req, response, await readBody(response.body, Number.MAX_SAFE_INTEGER));
    return;
  }
  if (call.parsed.stream) await relayMeteredStream(deps, call, response);
  else await finishWhole(deps, call, response);
}

/** The client's headers for a governed call: the answer must arrive unencoded to be metered. */
function governedHeaders(headers: IncomingHttpHeaders, length: number): IncomingHttpHeaders {
  return { ...headers, 'accept-encoding': 'identity', 'content-length': String(length) };
}

function relayWhole(req: ProxiedRequest, response: UpstreamResponse, bytes: Buffer): void {
  const headers = { ...response.headers, 'content-length': String(bytes.length) };
  req.clientRes.writeHead(response.statusCode, headers);
  req.clientRes.end(bytes);
}

/** A whole (non-streamed) answer: metered from its usage field, tool calls judged, then relayed or refused. */
async function finishWhole(deps: GovernanceDeps, call: LlmCall, response: UpstreamResponse): Promise<void> {
  const bytes = await readBody(response.body, Number.MAX_SAFE_INTEGER);
  let answer: unknown;
  try {
    answer = JSON.parse(bytes.toString('utf8'));
  } catch {
    answer = undefined;
  }
  const reading = call.adapter.readResponse(call.op, answer, call.parsed.estimatedInputTokens);
  const priced = settle(deps, call, reading, null);
  let blocked: { code: SvcCode; message: string } | null = null;
  for (const name of reading.toolCalls) {
    const verdict = governToolCall(deps, call.envelope, name, 'model', call.context);
    if (!verdict.allowed) blocked ??= { code: verdict.code, message: verdict.message };
  }
  deps.logger.debug(
    { request_id: call.req.id, envelope_id: call.envelope.envelopeId, model: reading.model, cost_usd: priced.usd },
    'llm call metered',
  );
  if (blocked !== null) {
    sendProviderRefusal(
      call.req.clientRes,
      call.adapter,
      blocked.code,
      blocked.message,
      call.req.id,
      call.envelope.envelopeId,
    );
    return;
  }
  relayWhole(call.req, response, bytes);
}

/**
 * Settles the reservation with what the answer really used, counts it, and records the
 * `llm.call` event. `cutOff` names why a stream was ended early.
 */
export function settle(
  deps: GovernanceDeps,
  call: LlmCall,
  reading: ResponseReading,
  cutOff: string | null,
): PricedUsage {
  const model = reading.model === '' ? call.parsed.model : reading.model;
  const priced = price(deps.prices, model, reading.usage);
  call.reservation.settle(priced);
  const labels = { provider: call.adapter.id, model: deps.metrics.models.label(model) };
  deps.metrics.tokens.inc({ ...labels, direction: 'input' }, reading.usage.input);
  deps.metrics.tokens.inc({ ...labels, direction: 'output' }, reading.usage.output);
  deps.metrics.cost.inc(labels, priced.usd);
  if (!priced.known) deps.metrics.unknownModels.inc({ provider: call.adapter.id });
  void deps.recorder.usage(call.envelope, {
    eventType: 'llm.call',
    model,
    tokens: { input: reading.usage.input, output: reading.usage.output },
    costUsd: priced.usd,
    payload: {
      provider: call.adapter.id,
      operation: call.op,
      stream: call.parsed.stream,
      usage_source: reading.usageSource,
      cached_input_tokens: reading.usage.cachedInput,
      cost_pico_usd: priced.pico,
      priced: priced.known,
      tool_calls: [...reading.toolCalls],
      request_id: call.req.id,
      cut_off: cutOff,
    },
  });
  return priced;
}
