import { timeOrderedUuid } from '../../core/domain/index.ts';
import { deniesModel, maxOutputTokens } from '../../core/metering/prices.ts';
import { isSvcError, type SvcCode } from '../../core/errors/index.ts';
import { ZERO, isRefusal } from '../enforcement/index.ts';
import { ENVELOPE_HEADER, type LocalEnvelope } from '../envelopes/index.ts';
import { envelopeFor } from './envelope-for.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import { FALLBACK_MAX_OUTPUT_TOKENS, type ProviderAdapter } from '../providers/index.ts';
import { relayResponse, type UpstreamResponse } from '../upstream/index.ts';
import { price } from './call-pricing.ts';
import { writeToClient } from './client-write.ts';
import { awaitResumed, endedRefusal } from './await-resumed.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { UNRECORDED } from './llm-call/decide-call.ts';
import { governedHeaders } from './llm-call/forward-call.ts';
import { sendProviderRefusal } from './provider-refusal.ts';
import { contentCodings, decompress, DECODED_DROPS, headersWithout } from './decode-body.ts';
import { readRequestBody } from './read-body.ts';
import { recorded } from './llm-call/settlement.ts';
import type { Charge, ChargeBasis } from './settle-call.ts';
import { CallCharge } from './call-charge.ts';
import { TextSample } from './text-sample.ts';
import { refused } from './tool-calls.ts';
import { mayHaveReachedProvider } from './upstream-failure.ts';
import { checkModelName } from './model-name.ts';
import { readUnclassifiedBody } from './unclassified-body.ts';
import { upstreamSignal } from './upstream-signal.ts';

/**
 * A plain read generates nothing: `GET`/`HEAD` without a body and without a protocol upgrade
 * (a realtime websocket is a generation the proxy cannot meter).
 */
export function isPlainRead(req: ProxiedRequest): boolean {
  const method = req.method.toUpperCase();
  return (method === 'GET' || method === 'HEAD') && !req.hasBody && req.headers.upgrade === undefined;
}

/**
 * Relays a request unchanged (governance headers are stripped by the upstream client). On a
 * provider host (`adapter` given) an upstream that cannot be reached is answered in the
 * provider's own error format, as every other refusal there is.
 */
export async function passThrough(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  provider: string,
  adapter?: ProviderAdapter,
): Promise<void> {
  let response: UpstreamResponse;
  try {
    response = await deps.upstream.request({
      url: req.targetUrl,
      method: req.method,
      headers: req.headers,
      body: req.hasBody ? req.body : null,
      signal: req.signal,
      provider,
      receivedAt: req.receivedAt,
    });
  } catch (error) {
    if (adapter === undefined || !isSvcError(error)) throw error;
    sendProviderRefusal(req.clientRes, adapter, error.code, error.message, req.id, null);
    return;
  }
  await relayResponse(req.clientRes, response);
}

/**
 * A request on a provider host that matches none of its routes (docs/providers.md). It is
 * never free and never ungoverned: plain reads pass (they generate nothing); anything else is
 * refused (`proxy_unclassified_paths=refuse`) or, by default, governed like a call whose usage
 * cannot be read: the envelope and the `llm:<model>` policy apply (the model the path names where
 * the provider serves that one, else the body's; `llm:unclassified` when neither names one), and
 * the request and answer are charged at the tokenizer's estimate of their bytes, priced as the
 * model (or, naming none, by the unknown-model rule). A body that declares tools is refused
 * (`readUnclassifiedBody`).
 */
export async function governUnclassifiedCall(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  adapter: ProviderAdapter,
): Promise<void> {
  const path = req.targetUrl.pathname;
  const count = (outcome: string) => deps.metrics.unclassified.inc({ provider: adapter.id, outcome });
  const refuse = (code: SvcCode, message: string, envelopeId: string | null) =>
    sendProviderRefusal(req.clientRes, adapter, code, message, req.id, envelopeId);
  if (isPlainRead(req)) {
    count('free');
    return passThrough(deps, req, adapter.id, adapter);
  }
  if (deps.unclassifiedPaths === 'refuse') {
    count('refused');
    refuse(
      'SVC-ADP-5003',
      `${req.method} ${path} is not a route the proxy meters for ${adapter.id}; such requests are refused (proxy_unclassified_paths=refuse)`,
      null,
    );
    return;
  }
  let bytes: Buffer;
  let headers = req.headers;
  let model: string;
  try {
    bytes = await readRequestBody(req, deps.bodyLimitBytes);
    // Counted as what it holds, and sent as that: a compressed body would be estimated at a
    // fraction of what the provider reads. Not decoded as text: it may be a binary upload.
    const codings = contentCodings(req.headers);
    if (codings.length > 0) {
      bytes = await decompress(bytes, codings, deps.bodyLimitBytes);
      headers = headersWithout(req.headers, DECODED_DROPS);
    }
    // Read for its tools and strictness even when the path names the model.
    const named = readUnclassifiedBody(bytes);
    model = adapter.modelNamedIn?.(path) ?? named.model;
    checkModelName(model);
  } catch (error) {
    if (!isSvcError(error)) throw error;
    count(error.code === 'SVC-ADP-5003' ? 'refused' : 'invalid');
    refuse(error.code, error.message, null);
    return;
  }
  const envelope = envelopeFor(deps, req.headers);
  if (isSvcError(envelope)) {
    count('refused');
    refuse(envelope.code, envelope.message, null);
    return;
  }
  // Held while the envelope or the sidecar is paused, as a model call is, before anything is sent.
  const stopped = endedRefusal(envelope) ?? (await awaitResumed(deps, req, envelope, bytes.length));
  if (stopped !== null) {
    count('refused');
    refuse(stopped.code, stopped.message, envelope.envelopeId);
    return;
  }
  if (model === '' || deps.prices.lookup(model) === undefined) deps.metrics.unknownModels.inc({ provider: adapter.id });
  if (model !== '' && deniesModel(deps.prices, model)) {
    count('refused');
    refuse(
      'SVC-ADP-5004',
      `model ${model} has no price in the price table, and unknown models are refused (unknown_model_price=deny)`,
      envelope.envelopeId,
    );
    return;
  }
  const sent = new TextSample();
  sent.push(bytes);
  const input = await sent.tokens(deps.tokens, model);
  const action = `llm:${model === '' ? 'unclassified' : model}`;
  const hold = price(deps.prices, model, { input, output: 0, cachedInput: 0 }, adapter.id);
  const context: Record<string, unknown> = {
    model,
    model_name: model,
    model_id: model,
    provider: adapter.id,
    adapter_type: adapter.id,
    tenant_id: deps.tenantId,
    workflow_id: deps.workflows.of(envelope.budgetId),
    operation: 'unclassified',
    method: req.method,
    path,
    host: req.targetUrl.hostname,
    envelope_id: envelope.envelopeId,
    execution_id: envelope.executionId,
    budget_id: envelope.budgetId,
    estimated_input_tokens: input,
    token_count: input,
    estimated_cost: hold.usd,
  };
  // A body the proxy cannot read field by field is judged whole: any text it holds is seen.
  const verdict = deps.gate.check(action, context, { input_text: () => bytes.toString('utf8') });
  if (!verdict.allowed) {
    count('refused');
    refused(deps, envelope, action, verdict);
    refuse(verdict.code, verdict.message, envelope.envelopeId);
    return;
  }
  const lease = await deps.leases.lease(envelope.budgetId);
  const reservation = lease.reserve(hold, hold);
  if (isRefusal(reservation)) {
    count('refused');
    refuse(reservation.code, reservation.message, envelope.envelopeId);
    return;
  }
  const room = await deps.recorder.usageRoom();
  if (room === null) {
    reservation.settle(ZERO);
    count('refused');
    refuse('SVC-EVT-4001', UNRECORDED, envelope.envelopeId);
    return;
  }
  count('metered');
  const settlement = new CallCharge(deps, {
    provider: adapter.id,
    envelope,
    reservation,
    requestId: req.id,
    requestedModel: model,
    operation: 'unclassified',
    stream: false,
    room,
    eventId: timeOrderedUuid(),
  });
  const charge = (output: number, basis: ChargeBasis, cutOff: string | null): Charge => ({
    model: '',
    usage: { input, output, cachedInput: 0 },
    usageSource: 'estimated',
    basis,
    toolCalls: [],
    cutOff,
    aborted: req.signal.aborted,
    detail: { method: req.method, path },
  });
  // The most an answer read in part (or not at all) can count: one token per byte, the bound its
  // hold grows by, of what it declared or what came, and at least the model's answer bound.
  const answerBound = maxOutputTokens(deps.prices, model, FALLBACK_MAX_OUTPUT_TOKENS);
  const worst = (answerBytes: number, cutOff: string) =>
    charge(Math.max(answerBound, answerBytes), 'worst_case', cutOff);
  // Its worst case stands for it while its answer is drained (`CallCharge`): once cut, or once its
  // client left before it was charged. One that stood for a call not charged after all is withdrawn.
  let response: UpstreamResponse | undefined;
  const sample = new TextSample();
  const left = () => settlement.hold(worst(answerSize(response, sample), 'client_gone'));
  // Made as the request goes upstream: a client gone already has the call's worst case held at once.
  const upstream = upstreamSignal(req.signal, deps.abortDrainMs, left);
  try {
    try {
      response = await deps.upstream.request({
        url: req.targetUrl,
        method: req.method,
        headers: governedHeaders(headers, bytes.length),
        body: bytes,
        signal: upstream.signal,
        provider: adapter.id,
        receivedAt: req.receivedAt,
      });
    } catch (error) {
      if (mayHaveReachedProvider(error)) {
        settlement.settle(worst(0, req.signal.aborted ? 'client_gone' : 'upstream_failed'));
        await recorded(deps);
      } else settlement.withdraw();
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
    response.headers[ENVELOPE_HEADER] = envelope.envelopeId;
    if (response.statusCode >= 400) {
      // The provider refused: nothing generated, nothing charged.
      settlement.withdraw();
      await relayResponse(req.clientRes, response).catch(() => req.clientRes.destroy());
      return;
    }
    // Held at its byte bound as it arrives (a byte-level BPE token covers at least one byte), the
    // hold extended from the lease: an answer the lease cannot cover is cut, as a stream is, and so
    // is one whose envelope ends meanwhile; either is charged as a cut stream is: the estimate of
    // the whole answer once drained, else its worst case.
    const covers = (answerBytes: number) =>
      reservation.cover(price(deps.prices, model, { input, output: answerBytes, cachedInput: 0 }, adapter.id));
    const cut = (reason: AnswerCut, answerBytes: number, end: () => void) => {
      settlement.cut(
        upstream,
        reason,
        reason === 'budget'
          ? `budget ${envelope.budgetId} exhausted mid-answer`
          : `envelope ${envelope.envelopeId} ended mid-answer`,
        worst(answerBytes, reason),
        end,
      );
    };
    const answer = await relayCounting(deps, req, envelope, response, sample, covers, cut);
    // An answer not read to its end that nobody stopped receiving failed upstream.
    const read = answer.complete
      ? charge(await answer.sample.tokens(deps.tokens, model), 'estimate', answer.cutOff)
      : worst(answer.bytes, answer.cutOff ?? 'upstream_failed');
    settlement.settle(read);
    await recorded(deps);
    if (answer.complete && answer.cutOff === null) req.clientRes.end(answer.rest);
  } finally {
    upstream.dispose();
    // Not charged (nothing reached the provider, or it refused): the room is not needed.
    room.release();
  }
}

/** Why the proxy cut an answer: its budget could not cover it, or its envelope ended. */
type AnswerCut = 'budget' | 'terminated';

interface RelayedAnswer {
  sample: TextSample;
  /** Read to its end: else (failed, or past the bound of a rest nobody receives) charged at its worst case. */
  complete: boolean;
  /** Its size: what it declared, or what came if more. */
  bytes: number;
  /** Why nobody received its rest: it was cut, or its client left. */
  cutOff: AnswerCut | 'client_gone' | null;
  /** Held back from a complete answer of a known length, for the caller to end it with. */
  rest: Uint8Array | undefined;
}

/**
 * Relays an answer chunk by chunk while sampling it into `sample` for its token estimate, each
 * chunk only once `covers` holds for the answer so far, else the answer is cut there (`cut`, which
 * ends the agent's answer once the call's worst case is written); it is cut the same way,
 * whatever it is waiting for, when `envelope` ends. Its format is not known, so no error event
 * can be written: the agent's connection is closed. Neither a client that leaves nor a cut stops
 * the count: the rest is read (within the drain time and the answer bound).
 *
 * A complete answer is left open: the caller ends it with `rest` once the charge is recorded, so
 * a process killed at any moment never leaves an answer delivered in full and unrecorded. A
 * chunked answer is forwarded as it comes and only its terminating chunk waits; one of a known
 * length is whole with its last byte, so its newest chunk waits for the next (or for the end).
 */
async function relayCounting(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  envelope: LocalEnvelope,
  response: UpstreamResponse,
  sample: TextSample,
  covers: (answerBytes: number) => boolean,
  cut: (reason: AnswerCut, answerBytes: number, end: () => void) => void,
): Promise<RelayedAnswer> {
  const res = req.clientRes;
  const sized = response.headers['content-length'] !== undefined;
  const size = () => answerSize(response, sample);
  res.writeHead(response.statusCode, response.headers);
  if (!sized) res.flushHeaders();
  let held: Uint8Array | undefined;
  let gone = false;
  let cutOff: AnswerCut | null = null;
  let complete = false;
  const stop = (reason: AnswerCut) => {
    // Set first: a budget cut ends the envelope, which calls `cutter` from within `cut`.
    if (cutOff !== null) return;
    cutOff = reason;
    held = undefined;
    cut(reason, size(), () => res.destroy());
  };
  const cutter = () => stop('terminated');
  envelope.inflight.add(cutter);
  // Ended while the request was on its way: nothing of the answer goes on.
  if (envelope.ending !== null) cutter();
  try {
    reads: {
      for await (const chunk of response.body) {
        sample.push(chunk as Uint8Array);
        // Nobody receives the rest: it is read for what the provider generated, within the bound.
        if (gone || cutOff !== null) {
          if (sample.totalBytes > deps.responseLimitBytes) break reads;
          continue;
        }
        if (!covers(sample.totalBytes)) {
          stop('budget');
          continue;
        }
        const out = sized ? held : (chunk as Uint8Array);
        if (sized) held = chunk as Uint8Array;
        if (out !== undefined && !(await writeToClient(res, out, req.signal))) gone = true;
      }
      complete = true;
    }
  } catch {
    // The answer failed: it stays incomplete.
  } finally {
    envelope.inflight.delete(cutter);
  }
  if (!complete) response.body.destroy();
  gone ||= req.signal.aborted;
  // A cut answer's connection closes once its worst case is written (`stop`).
  if (cutOff === null && (gone || !complete)) res.destroy();
  return { sample, complete, bytes: size(), cutOff: cutOff ?? (gone ? 'client_gone' : null), rest: held };
}

/** An answer's size as far as it is known: what it declared, or what came if more. */
function answerSize(response: UpstreamResponse | undefined, sample: TextSample): number {
  const declared = Number(response?.headers['content-length']);
  return Math.max(Number.isSafeInteger(declared) ? declared : 0, sample.totalBytes);
}
