import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { isSvcError, type SvcCode } from '../../core/errors/index.ts';
import type { Ending } from '../envelopes/index.ts';
import type { CutoffReason } from '../metrics/index.ts';
import type { StreamProgress } from '../providers/index.ts';
import type { UpstreamResponse } from '../upstream/index.ts';
import { price } from './call-pricing.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { settle, type LlmCall } from './llm-call.ts';
import { governToolCall } from './tool-calls.ts';

interface Cut {
  reason: CutoffReason;
  code: SvcCode;
  message: string;
}

/**
 * Relays a streamed answer as it arrives, metering it event by event. Before an event is
 * forwarded its running cost must be covered by the reservation (extended from the lease as needed);
 * when it cannot be, or a tool call the model starts is blocked, or the envelope is ended
 * elsewhere, forwarding stops, the provider's own stream error event is written and the
 * response ends. Only whole events are forwarded, so the error event lands cleanly.
 */
export async function relayMeteredStream(
  deps: GovernanceDeps,
  call: LlmCall,
  response: UpstreamResponse,
): Promise<void> {
  const { req, adapter, parsed, envelope, reservation } = call;
  const res = req.clientRes;
  const meter = adapter.createStreamMeter(call.op, parsed.model, {
    estimatedInputTokens: parsed.estimatedInputTokens,
    hideStreamUsage: call.hideStreamUsage,
  });
  const headers = { ...response.headers };
  delete headers['content-length'];
  res.writeHead(response.statusCode, headers);
  res.flushHeaders();

  const state: { cut: Cut | null } = { cut: null };
  const cutter = (ending: Ending) => {
    state.cut ??= {
      reason: 'terminated',
      code: 'SVC-ENV-1003',
      message: `envelope ${envelope.envelopeId} ended (${ending.status}): ${ending.reason}`,
    };
    response.body.destroy();
  };
  envelope.inflight.add(cutter);
  let progress: StreamProgress | null = null;
  let toolsSeen = 0;
  let failed = false;
  let gone = false;
  try {
    reads: for await (const chunk of response.body) {
      for (const step of meter.push(chunk as Uint8Array)) {
        progress = step;
        for (; toolsSeen < step.toolCalls.length; toolsSeen++) {
          const name = step.toolCalls[toolsSeen] as string;
          const verdict = governToolCall(deps, envelope, name, 'model', call.context);
          if (!verdict.allowed) state.cut ??= { reason: 'policy', code: verdict.code, message: verdict.message };
        }
        if (state.cut === null) {
          const running = price(deps.prices, parsed.model, step.usage);
          const more = {
            tokens: Math.max(0, running.tokens - reservation.held.tokens),
            pico: Math.max(0, running.pico - reservation.held.pico),
          };
          if ((more.tokens > 0 || more.pico > 0) && !reservation.extend(more)) {
            state.cut = {
              reason: 'budget',
              code: 'SVC-BUD-3001',
              message: `budget ${envelope.budgetId} exhausted mid-stream`,
            };
          }
        }
        if (state.cut !== null) break reads;
        if (!(await write(res, step.forward, req.signal))) {
          gone = true;
          break reads;
        }
      }
    }
  } catch (error) {
    // The meter refuses an event over the event limit: the stream ends with the provider's error event.
    if (state.cut === null && isSvcError(error)) {
      state.cut = { reason: 'oversize', code: error.code, message: error.message };
    } else if (state.cut === null) {
      failed = true;
      deps.logger.warn({ request_id: req.id, err: (error as Error).message }, 'upstream stream failed');
    }
  } finally {
    envelope.inflight.delete(cutter);
  }
  if (gone) response.body.destroy();
  if (state.cut === null && !failed && !gone) {
    progress = meter.end();
    await write(res, progress.forward, req.signal);
  }
  const usage = progress?.usage ?? { input: parsed.estimatedInputTokens, output: 0, cachedInput: 0 };
  const cut = state.cut;
  settle(
    deps,
    call,
    {
      usage,
      usageSource: progress?.usageSource ?? 'estimated',
      toolCalls: [...(progress?.toolCalls ?? [])],
      model: parsed.model,
    },
    cut?.reason ?? (failed ? 'upstream_failed' : gone ? 'client_gone' : null),
  );
  if (cut !== null) {
    response.body.destroy();
    deps.metrics.cutoffs.inc({ provider: adapter.id, reason: cut.reason });
    res.end(meter.errorEvent(cut.code, cut.message));
    if (
      cut.reason === 'budget' &&
      deps.envelopes.end(envelope.envelopeId, { status: 'BUDGET_EXCEEDED', reason: cut.message })
    ) {
      void deps.recorder.ended(envelope, 'BUDGET_EXCEEDED', cut.message);
    }
    return;
  }
  if (failed || gone) res.destroy();
  else res.end();
}

/** Writes with backpressure; false when the client went away. */
async function write(res: ServerResponse, bytes: Uint8Array, signal: AbortSignal): Promise<boolean> {
  if (res.destroyed) return false;
  if (bytes.length === 0 || res.write(bytes)) return true;
  try {
    await once(res, 'drain', { signal });
    return true;
  } catch {
    return false;
  }
}
