import type { ServiceTier, TokenUsage } from '../../core/metering/prices.ts';
import type { OutboxRoom } from '../../core/outbox/outbox.ts';
import type { Reservation } from '../enforcement/index.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';
import type { ProviderId, ToolCall, UsageSource } from '../providers/index.ts';
import { price, type PricedUsage } from './call-pricing.ts';
import { toolNames, type UsageRecord } from './event-recorder.ts';
import type { GovernanceDeps } from './governance-deps.ts';

/** What a charge is based on: the answer's usage, the worst case of a call whose usage is unknown, or a token estimate of an unclassified call. */
export type ChargeBasis = 'usage' | 'worst_case' | 'estimate';

/** One provider call being charged. */
export interface ChargedCall {
  provider: ProviderId;
  envelope: LocalEnvelope;
  reservation: Reservation;
  requestId: string;
  /** The model the request named; the answer's own model, when it reports one, prices it. */
  requestedModel: string;
  operation: string;
  stream: boolean;
  /** The outbox room held for its usage event when it was decided. */
  room: OutboxRoom;
  /** Its usage event's id, chosen when it was decided: a provisional charge and the final one share it. */
  eventId: string;
}

export interface Charge {
  /** The answer's model, or '' to price at the requested one. */
  model: string;
  usage: TokenUsage;
  usageSource: UsageSource;
  /** The tier the call was served at, as its answer says, else as its request asked; standard when neither. */
  serviceTier?: ServiceTier | undefined;
  basis: ChargeBasis;
  toolCalls: readonly ToolCall[];
  /** Why the answer did not reach its client whole (a cut-off, the client gone, an upstream failure). */
  cutOff: string | null;
  /** The client went away before its answer was complete. */
  aborted: boolean;
  /** Further payload fields of the event. */
  detail?: Record<string, unknown>;
}

/**
 * Settles the reservation with the charge, counts it, and records the `llm.call` event: every
 * call that may have reached the provider ends here exactly once, whatever ended it.
 */
export function chargeCall(deps: GovernanceDeps, call: ChargedCall, charge: Charge): PricedUsage {
  const { model, usage, priced, record } = usageRecord(deps, call, charge);
  call.reservation.settle(priced);
  // Usage the provider reported comes with an answer it served for this model.
  if (charge.usageSource === 'provider' && model !== '') deps.metrics.models.served(model);
  const labels = { provider: call.provider, model: deps.metrics.models.label(model === '' ? 'none' : model) };
  deps.metrics.tokens.inc({ ...labels, direction: 'input' }, usage.input);
  deps.metrics.tokens.inc({ ...labels, direction: 'output' }, usage.output);
  deps.metrics.cost.inc(labels, priced.usd);
  deps.anomalies.observeSpend(call.envelope, priced.usd);
  // The requested model was counted before the call; an answer naming another unknown one counts too.
  if (!priced.known && model !== call.requestedModel) deps.metrics.unknownModels.inc({ provider: call.provider });
  void deps.recorder.usage(call.envelope, record, call.room, call.eventId);
  return priced;
}

/**
 * Writes `charge` as the call's provisional record (`EventRecorder.provisional`): what stands for
 * it should the process end before `chargeCall` records its own, which replaces it. Nothing is
 * settled or counted. The write is started now and `chargeCall` waits for it; resolves once it is
 * written (or failed, logged).
 */
export function holdCharge(deps: GovernanceDeps, call: ChargedCall, charge: Charge): Promise<void> {
  return deps.recorder.provisional(call.envelope, usageRecord(deps, call, charge).record, call.eventId);
}

/** The charge priced, and the `llm.call` event that records it. */
function usageRecord(
  deps: GovernanceDeps,
  call: ChargedCall,
  charge: Charge,
): { model: string; usage: TokenUsage; priced: PricedUsage; record: UsageRecord } {
  const model = charge.model === '' ? call.requestedModel : charge.model;
  // A call that reached the provider is never free: a prompt the tokenizer counts as nothing (an
  // empty text, a value that is not text) or an answer without usage is still one request served.
  const usage = charge.usage.input >= 1 ? charge.usage : { ...charge.usage, input: 1 };
  const tier = charge.serviceTier ?? 'standard';
  const priced = price(deps.prices, model, usage, call.provider, tier);
  const record: UsageRecord = {
    eventType: 'llm.call',
    // An unclassified call may name no model.
    model: model === '' ? null : model,
    tokens: { input: usage.input, output: usage.output },
    costUsd: priced.usd,
    payload: {
      provider: call.provider,
      operation: call.operation,
      stream: call.stream,
      usage_source: charge.usageSource,
      charged: charge.basis,
      aborted: charge.aborted,
      cached_input_tokens: usage.cachedInput,
      cache_write_input_tokens: usage.cacheWrite ?? 0,
      cache_write_long_input_tokens: usage.cacheWriteLong ?? 0,
      hosted_tool_uses: usage.hosted ?? {},
      cost_pico_usd: priced.pico,
      priced: priced.known,
      price_basis: priced.basis,
      service_tier: tier,
      ...toolNames(charge.toolCalls.map((c) => c.name)),
      request_id: call.requestId,
      cut_off: charge.cutOff,
      ...charge.detail,
    },
  };
  return { model, usage, priced, record };
}
