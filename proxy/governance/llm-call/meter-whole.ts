import type { SvcCode } from '../../../core/errors/index.ts';
import type { ProxiedRequest } from '../../listener/index.ts';
import type { UpstreamResponse } from '../../upstream/index.ts';
import { decodedHeaders } from '../decode-body.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import { readAnswer } from '../read-answer.ts';
import { readBody } from '../read-body.ts';
import { governHeldToolCall } from '../tool-calls.ts';
import { chargeWorstCase, recorded, refuseAnswer, release, settle, type LlmCall } from './settlement.ts';

/** Relays an answer read whole, its length as read. */
export function relayWhole(
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
export async function relayProviderRefusal(
  deps: GovernanceDeps,
  call: LlmCall,
  response: UpstreamResponse,
): Promise<void> {
  release(call);
  let bytes: Buffer;
  try {
    bytes = await readBody(response.body, deps.responseLimitBytes, { what: 'provider error answer', rest: 'destroy' });
  } catch (error) {
    refuseAnswer(
      call,
      'SVC-ADP-5001',
      `provider refusal (status ${response.statusCode}) could not be read: ${(error as Error).message}`,
    );
    return;
  }
  relayWhole(call.req, response, bytes);
}

/**
 * Step 4, meter, for a whole (non-streamed) answer: read within its bound, metered from its
 * usage field, tool calls judged, then relayed or refused. An answer that cannot be read (over
 * the bound, the connection failed, the client left and the drain ran out) is charged at the
 * worst case.
 */
export async function meterWhole(deps: GovernanceDeps, call: LlmCall, response: UpstreamResponse): Promise<void> {
  const { req } = call;
  // What cannot be read as the agent's client will read it (a coding undone, the text decoded,
  // each key once) cannot be governed, its tool calls nor its usage: it is withheld and charged at
  // its worst case.
  const read = await readAnswer(response, deps.responseLimitBytes, "the provider's answer");
  if (!read.ok) {
    await chargeWorstCase(
      deps,
      call,
      read.tooLarge
        ? 'answer_too_large'
        : read.stage === 'decode'
          ? 'answer_unreadable'
          : req.signal.aborted
            ? 'client_gone'
            : 'upstream_failed',
    );
    refuseAnswer(
      call,
      read.tooLarge ? 'SVC-ADP-5005' : 'SVC-ADP-5001',
      `${read.message}; it cannot be governed, so it is withheld, and the call is charged at its worst case`,
    );
    return;
  }
  const { answer, decoded } = read;
  // Exact counts of what the answer does not report, the input's and the output's alike.
  const reading = await deps.tokens.exactly(() =>
    call.adapter.readResponse(call.op, answer, () => call.input.within()),
  );
  const aborted = req.signal.aborted;
  const priced = settle(call, reading, 'usage', aborted ? 'client_gone' : null, aborted);
  deps.logger.debug(
    { request_id: req.id, envelope_id: call.envelope.envelopeId, model: reading.model, cost_usd: priced?.usd, aborted },
    'llm call metered',
  );
  // Nobody receives the answer, so its tool calls will not be made.
  if (aborted) return;
  // A tool call that needs an approval holds the answer until it is decided (the wait ends early
  // when the client leaves or the envelope ends); once one is refused the answer is refused, and
  // the rest are judged without opening approvals for them.
  const { envelope } = call;
  const endingBefore = envelope.ending;
  let blocked: { code: SvcCode; message: string; terminate: boolean } | null = null;
  for (const toolCall of reading.toolCalls) {
    const verdict = await governHeldToolCall(
      deps,
      envelope,
      toolCall,
      'model',
      call.context,
      req.signal,
      blocked === null ? call.bytes + decoded.utf8.length : null,
    );
    if (!verdict.allowed) blocked ??= { code: verdict.code, message: verdict.message, terminate: verdict.terminate };
  }
  // Ended meanwhile, other than by a refusal here that ends it (a TERMINATE policy), as a held
  // model call is answered.
  const ending = envelope.ending;
  if (ending !== null && ending !== endingBefore && blocked?.terminate !== true)
    blocked = {
      code: 'SVC-ENV-1003',
      message: `envelope ${envelope.envelopeId} ended (${ending.status}) while the answer's tool calls were judged: ${ending.reason}`,
      terminate: false,
    };
  await recorded(deps);
  if (blocked !== null) {
    refuseAnswer(call, blocked.code, blocked.message);
    return;
  }
  relayWhole(req, response, decoded.utf8, decodedHeaders(response.headers, decoded));
}
