import { SvcError } from '../../core/errors/index.ts';
import {
  addUsage,
  boundedSum,
  isFinal,
  isTerminated,
  MAX_TOKEN_TOTAL,
  MAX_TOTAL,
  rollOver,
  usdToMicros,
  type Budget,
  type Envelope,
  type Overflow,
} from '../../core/domain/index.ts';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { recordApplied } from '../leases/unapplied-spend.ts';
import { SYSTEM_ACTOR } from '../caller.ts';
import type { Effects } from '../effects/effects.ts';
import { applyTransition } from '../envelopes/lifecycle.ts';
import type { Store } from '../store/store.ts';
import { fireAlerts } from './budget-alerts.ts';
import type { Pricer } from './pricer.ts';

export interface UsageDeps {
  store: Store;
  audit: AuditLog;
  pricer: Pricer;
}

export interface StoredEvent extends UsageEventMessage {
  cost_micros: number;
  received_at: string;
}

export interface UsageResult {
  duplicate: boolean;
  envelope: Envelope | null;
}

/**
 * Applies one usage event inside the caller's transaction: the envelope's cost summary, its own
 * limits, the budget's period usage and alerts, and the terminations those call for. The event id
 * is the idempotency key: an event applied before changes nothing, so replays never count twice.
 *
 * `strict` is the REST contract: an unknown envelope is 404, an ended one 409, and an event that
 * would carry a running total past its exact range is refused whole (SVC-EVT-4002). The event
 * processor is not strict: tokens a proxy reports after an envelope ended were still spent, so
 * they count toward the budget, and a total at its maximum stays there (see `Overflow`).
 */
export function applyUsage(
  deps: UsageDeps,
  event: UsageEventMessage,
  now: Date,
  effects: Effects,
  strict: boolean,
): UsageResult {
  const tenant = event.tenant_id;
  if (deps.store.get(tenant, 'event', event.event_id) !== undefined) return { duplicate: true, envelope: null };
  const envelope = deps.store.get<Envelope>(tenant, 'envelope', event.envelope_id);
  if (strict) {
    if (envelope === undefined)
      throw new SvcError('SVC-ENV-1001', `envelope ${event.envelope_id} not found`, { envelope_id: event.envelope_id });
    if (isFinal(envelope.status)) {
      const code = isTerminated(envelope.status) ? 'SVC-ENV-1003' : 'SVC-ENV-1004';
      throw new SvcError(code, `envelope ${envelope.envelope_id} is ${envelope.status}; it takes no more events`, {
        envelope_id: envelope.envelope_id,
        state: envelope.status,
      });
    }
  }

  const overflow: Overflow = strict ? 'refuse' : 'saturate';
  // A proxy's report is not bounded like a REST body: an absurd cost is charged at the maximum.
  const costMicros = Math.min(
    MAX_TOTAL,
    event.cost_usd !== null
      ? usdToMicros(event.cost_usd)
      : event.model !== null
        ? deps.pricer(
            event.model,
            event.tokens,
            typeof event.payload.provider === 'string' ? event.payload.provider : undefined,
          ).costMicros
        : 0,
  );
  const isLlm = event.event_type.startsWith('llm.');
  const isTool = event.event_type.startsWith('tool.');
  const stored: StoredEvent = { ...event, cost_micros: costMicros, received_at: now.toISOString() };
  deps.store.put(tenant, 'event', event.event_id, stored);
  // Arrival-ordered indexes for GET /v1/events: the whole tenant, and one envelope. The sequence
  // is zero-padded so that key order is arrival order.
  const seq = (deps.store.get<number>(tenant, 'meta', 'event_seq') ?? 0) + 1;
  deps.store.put(tenant, 'meta', 'event_seq', seq);
  const position = String(seq).padStart(15, '0');
  deps.store.put(tenant, 'event_log', position, event.event_id);
  deps.store.put(tenant, 'envelope_event', `${event.envelope_id}/${position}`, event.event_id);

  let current =
    envelope === undefined ? null : chargeEnvelope(envelope, event, { costMicros, isLlm, isTool, now, overflow });
  if (current !== null) {
    deps.store.put(tenant, 'envelope', current.envelope_id, current);
    if (current.status === 'AUTHORIZED') {
      current = applyTransition(
        deps,
        current,
        'RUNNING',
        { reason: 'first event recorded', actor: SYSTEM_ACTOR, now },
        effects,
      );
    }
    const overLimit = envelopeLimitReached(current);
    if (overLimit !== null && !isFinal(current.status)) {
      current = applyTransition(
        deps,
        current,
        'BUDGET_EXCEEDED',
        { reason: overLimit, actor: SYSTEM_ACTOR, now, force: true },
        effects,
      );
    }
  }

  const budgetId = envelope?.budget_id ?? event.budget_id;
  if (budgetId !== null) {
    const stored = deps.store.get<Budget>(tenant, 'budget', budgetId);
    if (stored !== undefined) {
      const charged = rollOver(stored, now);
      const usage = addUsage(
        charged.usage,
        {
          tokens_input: event.tokens.input,
          tokens_output: event.tokens.output,
          cost_micros: costMicros,
          executions: 0,
          llm_calls: isLlm ? 1 : 0,
          tool_calls: isTool ? 1 : 0,
        },
        overflow,
      );
      const alerts = fireAlerts({ ...charged, usage, updated_at: now.toISOString() }, event.envelope_id, now, effects);
      deps.store.put(tenant, 'budget', budgetId, alerts.budget);
      // A proxy's spend is also reported to the lease ledger; it stops holding it back once applied here.
      if (event.source.startsWith('proxy:'))
        recordApplied(deps.store, tenant, alerts.budget, {
          tokens: event.tokens.input + event.tokens.output,
          micros: costMicros,
        });
      effects.changes.push({ kind: 'budget', tenant, budgetId });
      if (alerts.terminate) {
        for (const id of deps.store.list<string>(tenant, 'budget_envelope', { prefix: `${budgetId}/` })) {
          const live = deps.store.get<Envelope>(tenant, 'envelope', id);
          if (live === undefined || isFinal(live.status)) continue;
          const ended = applyTransition(
            deps,
            live,
            'BUDGET_EXCEEDED',
            { reason: alerts.reason, actor: SYSTEM_ACTOR, now, force: true },
            effects,
          );
          if (ended.envelope_id === current?.envelope_id) current = ended;
        }
      }
    }
  }
  return { duplicate: false, envelope: current };
}

function chargeEnvelope(
  envelope: Envelope,
  event: UsageEventMessage,
  charge: { costMicros: number; isLlm: boolean; isTool: boolean; now: Date; overflow: Overflow },
): Envelope {
  const add = (field: string, total: number, added: number, max = MAX_TOTAL) =>
    boundedSum(total, added, `envelope ${field}`, charge.overflow, max);
  const cost = envelope.cost;
  const model_costs = [...cost.model_costs];
  if (event.model !== null) {
    const i = model_costs.findIndex((m) => m.model_id === event.model);
    const prev =
      i >= 0
        ? model_costs[i]!
        : { model_id: event.model, input_tokens: 0, output_tokens: 0, cost_micros: 0, call_count: 0 };
    const next = {
      ...prev,
      input_tokens: add('model input_tokens', prev.input_tokens, event.tokens.input, MAX_TOKEN_TOTAL),
      output_tokens: add('model output_tokens', prev.output_tokens, event.tokens.output, MAX_TOKEN_TOTAL),
      cost_micros: add('model cost_micros', prev.cost_micros, charge.costMicros),
      call_count: add('model call_count', prev.call_count, 1),
    };
    if (i >= 0) model_costs[i] = next;
    else model_costs.push(next);
  }
  return {
    ...envelope,
    cost: {
      tokens_input: add('tokens_input', cost.tokens_input, event.tokens.input, MAX_TOKEN_TOTAL),
      tokens_output: add('tokens_output', cost.tokens_output, event.tokens.output, MAX_TOKEN_TOTAL),
      cost_micros: add('cost_micros', cost.cost_micros, charge.costMicros),
      llm_calls: add('llm_calls', cost.llm_calls, charge.isLlm ? 1 : 0),
      tool_calls: add('tool_calls', cost.tool_calls, charge.isTool ? 1 : 0),
      model_costs,
    },
    updated_at: charge.now.toISOString(),
  };
}

function envelopeLimitReached(envelope: Envelope): string | null {
  const { token_limit, cost_limit_usd } = envelope.governance;
  if (token_limit !== null && envelope.cost.tokens_input + envelope.cost.tokens_output >= token_limit)
    return `envelope token_limit ${token_limit} reached`;
  if (cost_limit_usd !== null && envelope.cost.cost_micros >= usdToMicros(cost_limit_usd))
    return `envelope cost_limit_usd ${cost_limit_usd} reached`;
  return null;
}
