import { timeOrderedUuid } from '../../../core/domain/index.ts';
import { isSvcError } from '../../../core/errors/index.ts';
import { deniesModel } from '../../../core/metering/prices.ts';
import { isRefusal, ZERO } from '../../enforcement/index.ts';
import { whileInflight } from '../../envelopes/index.ts';
import { envelopeFor } from '../envelope-for.ts';
import type { ProxiedRequest } from '../../listener/index.ts';
import type { Operation, ProviderAdapter } from '../../providers/index.ts';
import { awaitResumed, endedRefusal } from '../await-resumed.ts';
import { CallCharge } from '../call-charge.ts';
import type { GovernanceDeps } from '../governance-deps.ts';
import { reserveCall } from '../reserve-call.ts';
import { refused, toolContext, type Judgeable } from '../tool-calls.ts';
import { COUNTED_FIELDS, llmCallContext } from './call-context.ts';
import type { ReadCall } from './read-call.ts';
import { refusal, type Refusal } from './refusal.ts';
import type { LlmCall } from './settlement.ts';

/** Why a call is refused when its usage event could not be recorded. */
export const UNRECORDED =
  "the proxy's event outbox is full (the bus has been unreachable for a while): a call it could not record is not made; calls go through again once its events are sent";

/**
 * The refusal of a request that hands the provider a remote MCP server free to call any of its
 * tools, named by the field that would restrict it. No rule decided it, so it names no policy.
 */
function unlistedServer(field: string): Judgeable {
  return {
    refusal: {
      allowed: false,
      result: null,
      code: 'SVC-ADP-5003',
      message: `${field}: a remote MCP server the provider calls may call any of its tools, before the answer shows the call, while the policies judge tools by name; it is refused (list the tools it may call)`,
      terminate: false,
    },
  };
}

/**
 * Step 2, decide: the envelope the call belongs to (ended ones refuse, paused ones hold the call
 * until resumed), the price check, the policies on `llm:<model>`, the hold on the budget
 * lease and the room for its usage event in the outbox. Nothing has gone upstream yet.
 */
export async function decideCall(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  adapter: ProviderAdapter,
  op: Operation,
  read: ReadCall,
): Promise<LlmCall | Refusal> {
  const { parsed, input } = read;
  // What holding the call keeps: its decoded request, counted against proxy_held_max_bytes.
  const bytes = read.bytes.length;
  const envelope = envelopeFor(deps, req.headers);
  if (isSvcError(envelope))
    return refusal(envelope.code === 'SVC-ENV-1003' ? 'terminated' : 'denied', envelope.code, envelope.message, null);
  // Counted before the ending is read: an anomaly that ends the envelope refuses this call too.
  deps.anomalies.observe(envelope);
  const ended = (): Refusal | null => {
    const stopped = endedRefusal(envelope);
    return stopped === null ? null : refusal('terminated', stopped.code, stopped.message, envelope.envelopeId);
  };
  const endedBefore = ended();
  if (endedBefore !== null) return endedBefore;
  // The calls of a paused envelope (or sidecar) wait here for it to run again, before anything is
  // reserved or sent; the wait ends early when the client leaves or the envelope ends meanwhile.
  const held = await awaitResumed(deps, req, envelope, bytes);
  if (held !== null)
    return refusal(envelope.ending === null ? 'paused' : 'terminated', held.code, held.message, envelope.envelopeId);

  if (deps.prices.lookup(parsed.model) === undefined) deps.metrics.unknownModels.inc({ provider: adapter.id });
  if (deniesModel(deps.prices, parsed.model)) {
    return refusal(
      'unpriced',
      'SVC-ADP-5004',
      `model ${parsed.model} has no price in the price table, and unknown models are refused (unknown_model_price=deny)`,
      envelope.envelopeId,
    );
  }

  // Counted only if a rule reads it, before the evaluation, which cannot wait; a ruleset that
  // starts reading it meanwhile reads the bound, never below the count (the tokenizer is not
  // loaded on the event loop for it).
  const action = `llm:${parsed.model}`;
  if (COUNTED_FIELDS.some((field) => deps.gate.reads(action, field))) await input.exact();
  const { context, made } = llmCallContext({
    tenantId: deps.tenantId,
    workflow: deps.workflows.of(envelope.budgetId),
    prices: deps.prices,
    provider: adapter.id,
    op,
    parsed,
    input,
    host: req.targetUrl.hostname,
    envelope,
  });
  // A call that needs an approval waits here for it, before anything is reserved or sent; the
  // wait ends early when the client leaves or the envelope ends meanwhile.
  const judge = async (action: string, read: Judgeable): Promise<Refusal | null> => {
    const verdict =
      'refusal' in read
        ? read.refusal
        : await whileInflight(envelope, (signal) =>
            deps.gate.checkJudged(
              action,
              read.judged,
              { signal: () => AbortSignal.any([req.signal, signal]), bytes },
              read.made,
            ),
          );
    const endedWhileHeld = ended();
    if (endedWhileHeld !== null) return endedWhileHeld;
    if (verdict.allowed) return null;
    refused(deps, envelope, action, verdict);
    return refusal('denied', verdict.code, verdict.message, envelope.envelopeId);
  };
  const modelRefused = await judge(action, { judged: context, made });
  if (modelRefused !== null) return modelRefused;
  // The tools the provider defines are judged as they are declared: those it runs itself are
  // called before the answer shows the call, so a refusal then could not undo them.
  for (const tool of parsed.builtinTools) {
    const toolRefused = await judge(`tool:${tool.name}`, toolContext(tool, 'declared', context));
    if (toolRefused !== null) return toolRefused;
  }
  const unlisted = parsed.unlistedMcpServers?.[0];
  // Refused as a policy denial is, its violation published, as the server's own action.
  if (unlisted !== undefined && deps.gate.judgesToolNames()) {
    const serverRefused = await judge('tool:mcp', unlistedServer(unlisted));
    if (serverRefused !== null) return serverRefused;
  }

  const lease = await deps.leases.lease(envelope.budgetId);
  const reservation = await reserveCall(lease, deps.prices, parsed, input, adapter.id);
  if (isRefusal(reservation)) {
    return refusal('budget_exceeded', reservation.code, reservation.message, envelope.envelopeId);
  }
  // A call whose usage could not be recorded is not made: with the outbox full (the bus away
  // for long), it would be served and never charged beyond this sidecar.
  const room = await deps.recorder.usageRoom();
  if (room === null) {
    reservation.settle(ZERO);
    return refusal('unrecorded', 'SVC-EVT-4001', UNRECORDED, envelope.envelopeId);
  }
  const settlement = new CallCharge(deps, {
    provider: adapter.id,
    envelope,
    reservation,
    requestId: req.id,
    requestedModel: parsed.model,
    operation: op,
    stream: parsed.stream,
    room,
    eventId: timeOrderedUuid(),
  });
  return {
    req,
    adapter,
    op,
    parsed,
    input,
    envelope,
    context,
    bytes,
    hideStreamUsage: false,
    sent: false,
    settlement,
    seen: () => undefined,
  };
}
