import type { IncomingHttpHeaders } from 'node:http';
import { deniesModel } from '../../core/metering/prices.ts';
import { isSvcError, SvcError, type SvcCode } from '../../core/errors/index.ts';
import { ZERO, isRefusal, type Reservation } from '../enforcement/index.ts';
import { ENVELOPE_HEADER, type LocalEnvelope, type Resolution } from '../envelopes/index.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import type { Operation, ParsedRequest, ProviderAdapter, ResponseReading } from '../providers/index.ts';
import type { UpstreamResponse } from '../upstream/index.ts';
import { worstCase, type PricedUsage } from './call-pricing.ts';
import { exactly, reserveCall } from './reserve-call.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { relayMeteredStream } from './metered-stream.ts';
import { sendProviderRefusal } from './provider-refusal.ts';
import { decodeBody, decodedHeaders, type DecodedBody } from './decode-body.ts';
import { InputTokens } from './input-tokens.ts';
import { MAX_BODY_DEPTH, parseJsonBody, readBody } from './read-body.ts';
import { parseStrictJson } from './strict-json.ts';
import { chargeCall, type ChargeBasis } from './settle-call.ts';
import { governToolCall, refused } from './tool-calls.ts';
import { mayHaveReachedProvider } from './upstream-failure.ts';
import { upstreamSignal } from './upstream-signal.ts';

/** One governed LLM call as the later stages see it. */
export interface LlmCall {
  req: ProxiedRequest;
  adapter: ProviderAdapter;
  op: Operation;
  /** Parsed with the input tokens' upper bound (`input.bound`); `input` counts exactly when needed. */
  parsed: ParsedRequest;
  input: InputTokens;
  envelope: LocalEnvelope;
  reservation: Reservation;
  /** Policy context shared by the call's own and its tool-call evaluations. */
  context: Record<string, unknown>;
  hideStreamUsage: boolean;
  /** Set once the call is charged (or released): exactly one settlement per call. */
  settled: boolean;
}

/**
 * The governed path of one provider call: parse, choose the envelope, price check, evaluate
 * `llm:<model>`, reserve from the budget lease, forward, meter the answer (whole or as it
 * streams), settle, and record the events. Refusals answer in the provider's own error format.
 * Every call that may have reached the provider is charged and recorded, also when its client
 * went away or the connection failed: at its real usage when it can still be read, else at its
 * worst case (docs/budgets.md).
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
  let headers: IncomingHttpHeaders;
  let json: unknown;
  let parsed: ParsedRequest;
  let input: InputTokens;
  try {
    const received = await readBody(req.body, deps.bodyLimitBytes, { declaredLength: req.headers['content-length'] });
    // Governed as the provider will read it (codings undone, text decoded), and sent on as that text in UTF-8.
    const decoded = await decodeBody(received, req.headers, deps.bodyLimitBytes);
    json = parseJsonBody(decoded.text);
    bytes = decoded.utf8;
    headers = decodedHeaders(req.headers, decoded);
    const path = req.targetUrl.pathname;
    // Parsed with the token bound; the exact count parses again, only if it is ever needed.
    parsed = deps.tokens.bounded(() => adapter.parseRequest(op, json, path));
    input = new InputTokens(
      parsed.estimatedInputTokens,
      () => adapter.parseRequest(op, json, path).estimatedInputTokens,
    );
  } catch (error) {
    if (!isSvcError(error)) throw error;
    deps.metrics.requests.inc({ provider: adapter.id, model: 'unparsed', decision: 'invalid' });
    refuse(error.code, error.message, null);
    return;
  }
  const model = deps.metrics.models.label(parsed.model);
  const count = (decision: string) => deps.metrics.requests.inc({ provider: adapter.id, model, decision });

  let resolution: Resolution;
  try {
    resolution = deps.envelopes.resolve(req.headers);
  } catch (error) {
    // A budget this sidecar may not charge: refused before anything is sent upstream.
    if (!isSvcError(error)) throw error;
    count('denied');
    refuse(error.code, error.message, null);
    return;
  }
  const { envelope, opened } = resolution;
  if (opened) void deps.recorder.opened(envelope);
  // Counted before the ending is read: an anomaly that ends the envelope refuses this call too.
  deps.anomalies.observe(envelope);
  if (envelope.ending !== null) {
    count('terminated');
    refuse(
      'SVC-ENV-1003',
      `envelope ${envelope.envelopeId} already ended (${envelope.ending.status}): ${envelope.ending.reason}`,
      envelope.envelopeId,
    );
    return;
  }

  if (deps.prices.lookup(parsed.model) === undefined) deps.metrics.unknownModels.inc({ provider: adapter.id });
  if (deniesModel(deps.prices, parsed.model)) {
    count('unpriced');
    refuse(
      'SVC-ADP-5004',
      `model ${parsed.model} has no price in the price table, and unknown models are refused (unknown_model_price=deny)`,
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
    max_output_tokens: parsed.maxOutputTokens,
    declared_tools: parsed.declaredTools,
  };
  // Counted only if a rule reads it.
  Object.defineProperty(context, 'estimated_input_tokens', { enumerable: true, get: () => input.exact() });
  const action = `llm:${parsed.model}`;
  const verdict = await deps.gate.checkJudged(action, context);
  if (!verdict.allowed) {
    count('denied');
    refused(deps, envelope, action, verdict);
    refuse(verdict.code, verdict.message, envelope.envelopeId);
    return;
  }

  const lease = await deps.leases.lease(envelope.budgetId);
  const reservation = reserveCall(lease, deps.prices, parsed, input, adapter.id);
  if (isRefusal(reservation)) {
    count('budget_exceeded');
    refuse(reservation.code, reservation.message, envelope.envelopeId);
    return;
  }

  const call: LlmCall = {
    req,
    adapter,
    op,
    parsed,
    input,
    envelope,
    reservation,
    context,
    hideStreamUsage: false,
    settled: false,
  };
  const upstream = upstreamSignal(req.signal, deps.abortDrainMs);
  let sent = false;
  try {
    const prepared = adapter.prepareRequest(op, json);
    const body = prepared.modified ? Buffer.from(JSON.stringify(prepared.body)) : bytes;
    call.hideStreamUsage = prepared.hideStreamUsage;
    let response: UpstreamResponse;
    try {
      sent = true;
      response = await deps.upstream.request({
        url: req.targetUrl,
        method: req.method,
        headers: governedHeaders(headers, body.length),
        body,
        signal: upstream.signal,
        provider: adapter.id,
        receivedAt: req.receivedAt,
      });
    } catch (error) {
      count('upstream_error');
      if (mayHaveReachedProvider(error))
        chargeWorstCase(deps, call, req.signal.aborted ? 'client_gone' : 'upstream_failed');
      else release(call);
      const failure = isSvcError(error) ? error : undefined;
      // An unforeseen error's text stays in the log; the agent reads the code and its request id.
      if (failure === undefined) deps.logger.warn({ request_id: req.id, err: error }, 'upstream call failed');
      refuse(
        failure?.code ?? 'SVC-ADP-5001',
        failure?.message ?? 'the call could not be completed upstream; see the proxy log for this request id',
        envelope.envelopeId,
      );
      return;
    }
    count('allowed');
    response.headers[ENVELOPE_HEADER] = envelope.envelopeId;
    if (response.statusCode >= 400) await relayRefusal(deps, call, response);
    else if (parsed.stream && !answersWhole(response, op)) await relayMeteredStream(deps, call, response);
    else await finishWhole(deps, call, response);
  } finally {
    upstream.dispose();
    // Whatever ended the call without settling it: charged if it may have reached the provider.
    if (!call.settled) {
      if (sent) chargeWorstCase(deps, call, 'proxy_failed');
      else release(call);
    }
  }
}

/** The client's headers for a governed call: the answer must arrive unencoded to be metered. */
export function governedHeaders(headers: IncomingHttpHeaders, length: number): IncomingHttpHeaders {
  return { ...headers, 'accept-encoding': 'identity', 'content-length': String(length) };
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

function relayWhole(
  req: ProxiedRequest,
  response: UpstreamResponse,
  bytes: Buffer,
  headers: Record<string, string | string[] | undefined> = response.headers,
): void {
  if (req.signal.aborted) return;
  req.clientRes.writeHead(response.statusCode, { ...headers, 'content-length': String(bytes.length) });
  req.clientRes.end(bytes);
}

/** The provider refused the call itself: nothing was generated, so nothing is charged. */
async function relayRefusal(deps: GovernanceDeps, call: LlmCall, response: UpstreamResponse): Promise<void> {
  release(call);
  let bytes: Buffer;
  try {
    bytes = await readBody(response.body, deps.responseLimitBytes, { what: 'provider error answer', rest: 'destroy' });
  } catch (error) {
    sendProviderRefusal(
      call.req.clientRes,
      call.adapter,
      'SVC-ADP-5001',
      `provider refusal (status ${response.statusCode}) could not be read: ${(error as Error).message}`,
      call.req.id,
      call.envelope.envelopeId,
    );
    return;
  }
  relayWhole(call.req, response, bytes);
}

/**
 * A whole (non-streamed) answer: read within its bound, metered from its usage field, tool
 * calls judged, then relayed or refused. An answer that cannot be read (over the bound, the
 * connection failed, the client left and the drain ran out) is charged at the worst case.
 */
async function finishWhole(deps: GovernanceDeps, call: LlmCall, response: UpstreamResponse): Promise<void> {
  const { req } = call;
  let bytes: Buffer;
  try {
    bytes = await readBody(response.body, deps.responseLimitBytes, { what: 'provider answer', rest: 'destroy' });
  } catch (error) {
    const tooLarge = isSvcError(error) && error.code === 'SVC-SYS-9009';
    chargeWorstCase(deps, call, tooLarge ? 'answer_too_large' : req.signal.aborted ? 'client_gone' : 'upstream_failed');
    sendProviderRefusal(
      req.clientRes,
      call.adapter,
      tooLarge ? 'SVC-ADP-5005' : 'SVC-ADP-5001',
      tooLarge
        ? `the provider's answer is larger than ${deps.responseLimitBytes} bytes (proxy_response_limit_bytes): it cannot be governed, so it is withheld; the call is charged at its worst case`
        : `the provider's answer failed mid-way: ${(error as Error).message}`,
      req.id,
      call.envelope.envelopeId,
    );
    return;
  }
  // Read as the agent's client will read it: a coding undone (a provider may compress although
  // asked for identity), the text decoded, each key once. What cannot be read so cannot be
  // governed (its tool calls, its usage): it is withheld and charged at its worst case.
  let decoded: DecodedBody;
  let answer: unknown;
  try {
    decoded = await decodeBody(bytes, response.headers, deps.responseLimitBytes, "the provider's answer");
    const parsed = parseStrictJson(decoded.text, { maxDepth: MAX_BODY_DEPTH });
    if (!parsed.ok) throw new SvcError('SVC-ADP-5001', `the provider's answer cannot be read: ${parsed.reason}`);
    answer = parsed.value;
  } catch (error) {
    if (!isSvcError(error)) throw error;
    const tooLarge = error.code === 'SVC-SYS-9009';
    chargeWorstCase(deps, call, tooLarge ? 'answer_too_large' : 'answer_unreadable');
    sendProviderRefusal(
      req.clientRes,
      call.adapter,
      tooLarge ? 'SVC-ADP-5005' : 'SVC-ADP-5001',
      `${error.message}; it cannot be governed, so it is withheld, and the call is charged at its worst case`,
      req.id,
      call.envelope.envelopeId,
    );
    return;
  }
  const reading = call.adapter.readResponse(call.op, answer, () => call.input.exact());
  const aborted = req.signal.aborted;
  const priced = settle(deps, call, reading, 'usage', aborted ? 'client_gone' : null, aborted);
  deps.logger.debug(
    { request_id: req.id, envelope_id: call.envelope.envelopeId, model: reading.model, cost_usd: priced.usd, aborted },
    'llm call metered',
  );
  // Nobody receives the answer, so its tool calls will not be made.
  if (aborted) return;
  let blocked: { code: SvcCode; message: string } | null = null;
  for (const toolCall of reading.toolCalls) {
    const verdict = await governToolCall(deps, call.envelope, toolCall, 'model', call.context);
    if (!verdict.allowed) blocked ??= { code: verdict.code, message: verdict.message };
  }
  await recorded(deps);
  if (blocked !== null) {
    sendProviderRefusal(req.clientRes, call.adapter, blocked.code, blocked.message, req.id, call.envelope.envelopeId);
    return;
  }
  relayWhole(req, response, decoded.utf8, decodedHeaders(response.headers, decoded));
}

/**
 * Settles the reservation with what the answer used (or, for `worst_case`, the most it could
 * have), counts it, and records the `llm.call` event. `cutOff` names why the answer did not
 * reach its client whole.
 */
export function settle(
  deps: GovernanceDeps,
  call: LlmCall,
  reading: ResponseReading,
  basis: ChargeBasis,
  cutOff: string | null,
  aborted: boolean,
): PricedUsage {
  call.settled = true;
  return chargeCall(
    deps,
    {
      provider: call.adapter.id,
      envelope: call.envelope,
      reservation: call.reservation,
      requestId: call.req.id,
      requestedModel: call.parsed.model,
      operation: call.op,
      stream: call.parsed.stream,
    },
    { ...reading, basis, cutOff, aborted },
  );
}

/**
 * Waits until the call's events are committed: the answer completes after its record, so a
 * process killed at any moment never leaves an answer delivered in full and unrecorded.
 */
export async function recorded(deps: GovernanceDeps): Promise<void> {
  const written = deps.recorder.written();
  if (written !== null) await written;
}

/** Returns the call's hold to the lease uncharged: the provider generated nothing. */
function release(call: LlmCall): void {
  call.settled = true;
  call.reservation.settle(ZERO);
}

/** Charges a call whose answer could not be read at the most it could have used. */
export function chargeWorstCase(deps: GovernanceDeps, call: LlmCall, cutOff: string, seen?: ResponseReading): void {
  settle(
    deps,
    call,
    {
      usage: worstCase(exactly(call.parsed, call.input), seen?.usage),
      usageSource: 'estimated',
      toolCalls: [...(seen?.toolCalls ?? [])],
      model: '',
    },
    'worst_case',
    cutOff,
    call.req.signal.aborted,
  );
}
