import type { SvcCode } from '../../../core/errors/index.ts';
import type { LocalEnvelope } from '../../envelopes/index.ts';
import type { CutoffReason } from '../../metrics/index.ts';
import type { ProxiedRequest } from '../../listener/index.ts';
import type { Operation, ParsedRequest, ProviderAdapter, ResponseReading } from '../../providers/index.ts';
import { worstCase, type PricedUsage } from '../call-pricing.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import type { InputTokens } from '../input-tokens.ts';
import { sendProviderRefusal } from '../provider-refusal.ts';
import type { CallCharge } from '../call-charge.ts';
import type { Charge, ChargeBasis } from '../settle-call.ts';
import type { UpstreamSignal } from '../upstream-signal.ts';

/** One governed LLM call once it is decided: what forwarding, metering and settling share. */
export interface LlmCall {
  req: ProxiedRequest;
  adapter: ProviderAdapter;
  op: Operation;
  parsed: ParsedRequest;
  input: InputTokens;
  envelope: LocalEnvelope;
  /** Policy context shared by the call's own and its tool-call evaluations. */
  context: Record<string, unknown>;
  /** The decoded request's size: what a hold of the call's tool calls counts besides the answer. */
  bytes: number;
  hideStreamUsage: boolean;
  /** Set once the request went upstream: from then on it may cost, whatever happens. */
  sent: boolean;
  /**
   * Its one settlement: charged or released exactly once, its worst case held provisionally
   * meanwhile. Its `call` holds the call's reservation and the room in the outbox for its usage
   * event (a call is made only if it can be recorded).
   */
  settlement: CallCharge;
  /** What was metered of its answer so far: counted in a worst case taken before the answer's end. */
  seen: () => ResponseReading | undefined;
}

/**
 * Step 5, settle: the reservation with what the answer used (or, for `worst_case`, the most it
 * could have), counted, and the `llm.call` event recorded. `cutOff` names why the answer did not
 * reach its client whole.
 */
export function settle(
  call: LlmCall,
  reading: ResponseReading,
  basis: ChargeBasis,
  cutOff: string | null,
  aborted: boolean,
): PricedUsage | undefined {
  return call.settlement.settle(charge(call, reading, basis, cutOff, aborted));
}

/**
 * Charges a call whose answer could not be read at the most it could have used, and resolves once
 * that charge is recorded: the refusal or the cut answer that tells the agent goes out after it.
 */
export async function chargeWorstCase(
  deps: GovernanceDeps,
  call: LlmCall,
  cutOff: string,
  seen?: ResponseReading,
): Promise<void> {
  // The prompt not counted yet (a process's first count loads the encoding, about a second): the
  // worst case at its bound stands for the call meanwhile, so a process killed during the count
  // has it published at its next start rather than losing the call.
  if (call.input.known() === undefined) holdWorstCase(call, cutOff, seen);
  await call.settlement.settleWhen(async () =>
    charge(call, worstReading(call, await call.input.exact(), seen), 'worst_case', cutOff, call.req.signal.aborted),
  );
  await recorded(deps);
}

/**
 * Cuts the call's answer (`cutCall`): its worst case, counting what was `seen` of it so far, stands
 * for it until the drain ends; `end` ends the agent's answer once it is written.
 */
export function cutAnswer(
  call: LlmCall,
  upstream: UpstreamSignal,
  cut: { reason: CutoffReason; message: string },
  seen: ResponseReading,
  end: () => void,
): void {
  call.settlement.cut(upstream, cut.reason, cut.message, heldWorstCase(call, cut.reason, seen), end);
}

/**
 * Has the call's worst case, counting what was metered of its answer so far (`seen`), stand for
 * it provisionally (`holdCharge`), as a cut's does: a process ending before the call is charged
 * leaves it charged. Its client left (nobody receives the rest of its answer, which is drained
 * for its usage, `upstreamSignal`), or it is charged at its worst case once its prompt is counted.
 * A call charged already, or cut (held) already, needs none.
 */
export function holdWorstCase(call: LlmCall, cutOff: string, seen: ResponseReading | undefined): void {
  call.settlement.hold(heldWorstCase(call, cutOff, seen));
}

/**
 * The worst case that stands for a call while its answer is drained. It takes the prompt as
 * counted so far, its upper bound unless the exact count was made already: counting it here would
 * hold the cut back (a process's first count loads the tokenizer's encoding, about a second), and
 * the bound is never below the count. The charge made once the drain ends counts it exactly.
 */
function heldWorstCase(call: LlmCall, cutOff: string, seen: ResponseReading | undefined): Charge {
  return charge(call, worstReading(call, call.input.current(), seen), 'worst_case', cutOff, call.req.signal.aborted);
}

/** The most the call can have used (`worstCase` of call-pricing), its prompt counted as `input`. */
function worstReading(call: LlmCall, input: number, seen: ResponseReading | undefined): ResponseReading {
  return {
    usage: worstCase({ ...call.parsed, estimatedInputTokens: input }, seen?.usage),
    usageSource: 'estimated',
    toolCalls: [...(seen?.toolCalls ?? [])],
    model: '',
    serviceTier: seen?.serviceTier,
  };
}

function charge(
  call: LlmCall,
  reading: ResponseReading,
  basis: ChargeBasis,
  cutOff: string | null,
  aborted: boolean,
): Charge {
  return { ...reading, serviceTier: reading.serviceTier ?? call.parsed.serviceTier, basis, cutOff, aborted };
}

/**
 * Returns the call's hold to the lease uncharged: the provider generated nothing. A worst case
 * that stood for it (its client left meanwhile) is withdrawn.
 */
export function release(call: LlmCall): void {
  call.settlement.withdraw();
  call.settlement.call.room.release();
}

/** Whatever ended the call without settling it: charged if it may have reached the provider. */
export async function settleUnfinished(deps: GovernanceDeps, call: LlmCall): Promise<void> {
  if (call.settlement.settled) return;
  if (call.sent) await chargeWorstCase(deps, call, 'proxy_failed');
  else release(call);
}

/**
 * Step 6, record: waits until the call's events are committed. The answer completes after its
 * record, so a process killed at any moment never leaves an answer delivered in full and unrecorded.
 */
export async function recorded(deps: GovernanceDeps): Promise<void> {
  const written = deps.recorder.written();
  if (written !== null) await written;
}

/** Answers the call's agent with a refusal in its provider's format. */
export function refuseAnswer(call: LlmCall, code: SvcCode, message: string): void {
  sendProviderRefusal(call.req.clientRes, call.adapter, code, message, call.req.id, call.envelope.envelopeId);
}
