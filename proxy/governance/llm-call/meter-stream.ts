import type { Readable } from 'node:stream';
import { isSvcError, type SvcCode } from '../../../core/errors/index.ts';
import type { Ending } from '../../envelopes/index.ts';
import type { CutoffReason } from '../../metrics/index.ts';
import { costPico } from '../../../core/metering/prices.ts';
import type { ResponseReading, StreamedToolCall, StreamProgress } from '../../providers/index.ts';
import type { UpstreamResponse } from '../../upstream/index.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import type { UpstreamSignal } from '../upstream-signal.ts';
import { billedTokens } from '../call-pricing.ts';
import { writeToClient as write } from '../client-write.ts';
import { contentCodings, decompressing, streamedHeaders } from '../decode-body.ts';
import { chargeWorstCase, cutAnswer, recorded, refuseAnswer, settle, type LlmCall } from './settlement.ts';
import { governHeldToolCall } from '../tool-calls.ts';
import { PendingBytes } from './pending-bytes.ts';

interface Cut {
  reason: CutoffReason;
  code: SvcCode;
  message: string;
}

/**
 * Step 4, meter, for a streamed answer: relays it as it arrives, metering it event by event. Before an event is
 * forwarded its running cost must be covered by the reservation (extended from the lease as needed);
 * when it cannot be, or a tool call the model starts is blocked, or the envelope is ended
 * elsewhere, forwarding stops there: the provider's own stream error event is written and the
 * response ends. Only whole events are forwarded, so the error event lands cleanly.
 *
 * Neither a client that goes away nor a cut ends the metering: the provider bills the answer
 * whether or not anyone receives it, so the rest of the stream is read (within
 * `proxy_abort_drain_ms` and `proxy_response_limit_bytes`) for the provider's final usage, and
 * a cut call is charged the larger of that and what was metered at the cut. A stream that does
 * not reach its end (drain bound, connection failure, closed early, an event the meter refuses)
 * is charged at the worst case of what remained: the whole answer bound.
 */
export async function meterStream(
  deps: GovernanceDeps,
  call: LlmCall,
  response: UpstreamResponse,
  upstream: UpstreamSignal,
): Promise<void> {
  const { req, adapter, parsed, envelope } = call;
  const { reservation } = call.settlement.call;
  const res = req.clientRes;
  // Metered as the client reads it: a coding the provider applied although asked for identity
  // is undone as the stream flows, and the client gets the decoded events.
  let source: Readable;
  try {
    source = decompressing(response.body, contentCodings(response.headers));
  } catch (error) {
    if (!isSvcError(error)) throw error;
    response.body.destroy();
    await chargeWorstCase(deps, call, 'answer_unreadable');
    refuseAnswer(
      call,
      'SVC-ADP-5001',
      `the provider's stream cannot be read (${error.message}); it cannot be governed, so it is withheld, and the call is charged at its worst case`,
    );
    return;
  }
  const meter = adapter.createStreamMeter(call.op, parsed.model, {
    // Running figures use the bound (as the hold did) until the provider reports its count.
    estimatedInputTokens: () => call.input.current(),
    hideStreamUsage: call.hideStreamUsage,
  });
  res.writeHead(response.statusCode, streamedHeaders(response.headers));
  // The headers go out with the first events when those are already here (one write, as a bare
  // relay makes), else on the next turn of the loop, so the agent never waits on them.
  const early = setImmediate(() => {
    if (!res.destroyed) res.flushHeaders();
  });

  const state: { cut: Cut | null } = { cut: null };
  let progress: StreamProgress | null = null;
  /** What the stream used as far as it was read: its input as the provider reported it, else `input`. */
  const readingOf = (input: number): ResponseReading => ({
    usage:
      progress === null
        ? { input, output: 0, cachedInput: 0 }
        : progress.inputReported
          ? progress.usage
          : { ...progress.usage, input, cachedInput: Math.min(progress.usage.cachedInput, input) },
    usageSource: progress?.usageSource ?? 'estimated',
    toolCalls: (progress?.toolCalls ?? []).map(({ name, arguments: args }) => ({ name, arguments: args })),
    model: parsed.model,
    serviceTier: progress?.serviceTier,
  });
  // The prompt is not counted in what was seen: a worst case counts it itself.
  call.seen = () => readingOf(0);
  /** Bytes held back while a tool call the model is writing awaits its judgement. */
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  /** Events metered and cleared to go, written together once the chunk that brought them is read. */
  const ready = new PendingBytes();
  /** A write to the client is under way: a cut from elsewhere ends the answer once it is done. */
  let writing = false;
  let stopped = false;
  /**
   * Ends the agent's answer at the cut: the events cleared before it go on, then the error event,
   * and nothing after, once the call's worst case, which stands for it while the upstream is read
   * on (drained) for its usage, is written (`cutCall`).
   */
  const stop = () => {
    const cut = state.cut;
    if (cut === null || stopped) return;
    stopped = true;
    clearImmediate(early);
    held = [];
    const out = ready.take(meter.errorEvent(cut.code, cut.message));
    cutAnswer(call, upstream, cut, readingOf(0), () => {
      if (!res.destroyed) res.end(out);
    });
  };
  const cutter = (ending: Ending) => {
    state.cut ??= {
      reason: 'terminated',
      code: 'SVC-ENV-1003',
      message: `envelope ${envelope.envelopeId} ended (${ending.status}): ${ending.reason}`,
    };
    if (!writing) stop();
  };
  envelope.inflight.add(cutter);
  /** Made at the first call judged: most answers have none. */
  let judged: Set<StreamedToolCall> | undefined;
  const isJudged = (toolCall: StreamedToolCall) => judged?.has(toolCall) === true;
  /**
   * Judges the calls whose arguments are now complete; the event that completed them is not yet
   * forwarded. One that needs an approval holds the stream (the upstream is not read meanwhile)
   * until it is decided, the client leaves or the envelope ends; once the stream is to be cut or
   * its client has left, calls are judged without opening approvals.
   */
  const judgeCompleted = async (calls: readonly StreamedToolCall[]) => {
    for (const toolCall of calls) {
      if (!toolCall.complete || isJudged(toolCall)) continue;
      (judged ??= new Set()).add(toolCall);
      const hold = state.cut === null && !req.signal.aborted ? call.bytes : null;
      const verdict = await governHeldToolCall(deps, envelope, toolCall, 'model', call.context, req.signal, hold);
      if (!verdict.allowed) state.cut ??= { reason: 'policy', code: verdict.code, message: verdict.message };
    }
  };
  /**
   * Whether the reservation covers the usage so far, at the tier the answer names (else the one
   * asked for), extended from the lease by what it lacks.
   */
  const covers = ({ usage, serviceTier }: StreamProgress) =>
    reservation.cover({
      tokens: billedTokens(usage),
      pico: costPico(deps.prices, parsed.model, usage, adapter.id, serviceTier ?? parsed.serviceTier),
    });
  const flush = async (): Promise<void> => {
    if (ready.empty || stopped) return;
    const out = ready.take();
    clearImmediate(early);
    writing = true;
    if (!gone && !(await write(res, out, req.signal))) gone = true;
    writing = false;
    stop();
  };
  /**
   * The output metered when the stream was cut (for a cut from elsewhere, at the next event read):
   * charged at least, whatever the provider reports.
   */
  let meteredAtCut: number | null = null;
  const cutHere = async () => {
    stop();
    if (meteredAtCut === null) meteredAtCut = (await meter.exact()).usage.output;
  };
  let failed = false;
  let gone = false;
  let drained = 0;
  let overLimit = false;
  /**
   * Whether the events of the chunk that completed the answer wait to go with the response's end:
   * one write fewer, and the answer's last event leaves only once the call is recorded. Only that
   * chunk's: whatever a provider sends after it flushes them as before.
   */
  let deferred = false;
  /**
   * Once the answer is complete, its body gets `streamEndWaitMs` to end. A provider that holds it
   * open longer would otherwise hold the agent's last events (deferred above) with it.
   */
  let endWait: NodeJS.Timeout | undefined;
  let endedByWait = false;
  try {
    reads: for await (const chunk of source) {
      gone ||= req.signal.aborted;
      // Nobody receives the rest: it is read for the provider's usage, within the response bound.
      if (gone || state.cut !== null) {
        drained += (chunk as Uint8Array).length;
        if (drained > deps.responseLimitBytes) {
          overLimit = true;
          break reads;
        }
      }
      for (const step of meter.push(chunk as Uint8Array)) {
        progress = step;
        // Tool calls nobody receives are not made: only a delivered stream has them judged. What
        // was cleared before goes on first, so a judgement never delays it.
        const hasCalls = step.toolCalls.length > 0;
        if (
          hasCalls &&
          !gone &&
          state.cut === null &&
          step.toolCalls.some((toolCall) => toolCall.complete && !isJudged(toolCall))
        ) {
          await flush();
          await judgeCompleted(step.toolCalls);
        }
        // A bound that outgrows the reservation extends it by the bound while the lease holds that
        // (far from the limit, as the reservation itself was made); else the text is counted
        // exactly (each piece once), the reservation extended by the exact figure only, and the
        // stream cut if the lease cannot cover that either. Settling gives back what was not used.
        if (state.cut === null && !covers(step) && !covers(await meter.exact())) {
          state.cut = {
            reason: 'budget',
            code: 'SVC-BUD-3001',
            message: `budget ${envelope.budgetId} exhausted mid-stream`,
          };
        }
        if (state.cut !== null) {
          await cutHere();
          continue;
        }
        if (gone) continue;
        if (hasCalls && step.toolCalls.some((toolCall) => !isJudged(toolCall))) {
          // A tool call is still being written: none of it reaches the agent before it is judged
          // whole, so a refused call is never half-delivered (its name included).
          held.push(step.forward);
          heldBytes += step.forward.length;
          if (heldBytes > deps.eventLimitBytes) {
            state.cut = {
              reason: 'oversize',
              code: 'SVC-SYS-9009',
              message: `a tool call held for judgement grew past ${deps.eventLimitBytes} bytes`,
            };
            await cutHere();
          }
          continue;
        }
        if (held.length > 0) {
          for (const bytes of held) ready.push(bytes);
          held = [];
          heldBytes = 0;
        }
        ready.push(step.forward);
      }
      if (progress?.done === true && !deferred) {
        deferred = true;
        endWait = setTimeout(() => {
          endedByWait = true;
          deps.logger.info(
            { request_id: req.id, wait_ms: deps.streamEndWaitMs },
            'provider held its stream open after the answer completed; closed',
          );
          source.destroy();
          response.body.destroy();
        }, deps.streamEndWaitMs);
      } else await flush();
    }
  } catch (error) {
    // The meter refuses an event over the event limit: the stream is cut there with the
    // provider's error event, and what follows cannot be metered.
    if (isSvcError(error)) state.cut ??= { reason: 'oversize', code: error.code, message: error.message };
    else if (state.cut === null && !endedByWait)
      deps.logger.warn(
        { request_id: req.id, err: (error as Error).message, client_gone: gone || req.signal.aborted },
        'upstream stream failed',
      );
    failed = !endedByWait;
  } finally {
    clearTimeout(endWait);
    envelope.inflight.delete(cutter);
  }
  stop();
  gone ||= req.signal.aborted;
  if (!failed && !overLimit) {
    progress = await meter.end();
    if (state.cut === null) {
      // A call the stream left open ends with it: judged before the last bytes go on.
      if (!gone) await judgeCompleted(progress.toolCalls);
      if (state.cut === null) {
        for (const bytes of held) ready.push(bytes);
        ready.push(progress.forward);
      } else stop();
    }
  } else if (progress !== null) {
    // Charged on what was metered: counted exactly where the provider reported no usage.
    progress = await meter.exact();
  }
  // The response ends next: headers not yet sent go with its last bytes.
  clearImmediate(early);
  const cut = state.cut;
  const complete = !failed && !overLimit && progress?.done === true;
  if (!complete) {
    source.destroy();
    response.body.destroy();
  }
  const reading = readingOf(progress?.inputReported === true ? 0 : await call.input.exact());
  if (cut !== null) {
    // The agent's answer ended at the cut; the provider's was read to its end for its usage.
    if (complete)
      settle(
        call,
        { ...reading, usage: { ...reading.usage, output: Math.max(reading.usage.output, meteredAtCut ?? 0) } },
        'usage',
        cut.reason,
        gone,
      );
    else await chargeWorstCase(deps, call, cut.reason, reading);
    await recorded(deps);
    return;
  }
  if (complete) settle(call, reading, 'usage', gone ? 'client_gone' : null, gone);
  else
    await chargeWorstCase(
      deps,
      call,
      gone ? 'client_gone' : failed ? 'upstream_failed' : 'upstream_incomplete',
      reading,
    );
  if (gone || failed) res.destroy();
  else {
    await recorded(deps);
    res.end(ready.empty ? undefined : ready.take());
  }
}
