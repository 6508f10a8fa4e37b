import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import type {
  EnvelopeLifecycleMessage,
  PolicyViolationMessage,
  UsageEventMessage,
} from '../../core/events/messages.ts';
import {
  timeOrderedUuid,
  clipText,
  MAX_LIST_ITEMS,
  MAX_NAME_LENGTH,
  MAX_TEXT_LENGTH,
} from '../../core/domain/index.ts';
import type { EnvelopeOpened } from '../../core/sync/contract.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import type { OutboxRoom } from '../../core/outbox/outbox.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';

export interface EventSink {
  /** Writes the event, into `room` when room was held for it. */
  append(event: OutboxEvent, room?: OutboxRoom): Promise<void>;
  /** Holds room for events to come; null when there is none. */
  reserveRoom(entries: number, bytes: number): Promise<OutboxRoom | null>;
}

/** Where provisional events wait, kept across a restart and never published from there. */
export interface ProvisionalStore {
  put(event: OutboxEvent): Promise<void>;
  remove(id: string): Promise<void>;
  all(): OutboxEvent[];
}

export interface UsageRecord {
  eventType: string;
  model: string | null;
  tokens: { input: number; output: number };
  costUsd: number | null;
  payload: Record<string, unknown>;
}

/**
 * Bytes held for a call's usage event before the call is made: more than such an event takes
 * (its fields, a few tool call names, an unclassified call's path). A larger one looks for its
 * own room when it is written.
 */
const USAGE_EVENT_BYTES = 16 * 1024;

export interface RecorderLogger {
  error(object: Record<string, unknown>, message: string): void;
}

/**
 * Turns what the proxy observed into bus messages written to the durable outbox; the outbox
 * publishes them in order, so the hot path never waits on the control plane. An outbox that
 * refuses an event (full) is logged: the call it describes has already happened. What an agent
 * or a provider chose (a model an answer names, tool names, a denial's action and message) is
 * clipped to the bus's bounds (`clipText`): the event must fit the outbox and the control plane's
 * checks, or a call would go unbilled and a denial unheard for the length of one name.
 *
 * A call whose charge is not known yet (an answer cut and still being drained) can have one
 * stand for it meanwhile: a provisional event, kept in the proxy's store and not published, which
 * the call's own event of the same id replaces, and which goes out instead should the process
 * end first.
 */
export class EventRecorder {
  readonly #tenantId: string;
  readonly #source: string;
  readonly #sink: EventSink;
  readonly #provisionals: ProvisionalStore;
  readonly #logger: RecorderLogger;
  readonly #clock: () => Date;
  /** Events handed to the outbox (or written provisionally) and not yet committed. */
  readonly #pending = new Set<Promise<void>>();
  /**
   * This process's provisional events by msg id: their write, and whether `releaseProvisional`
   * has handed them to the outbox already.
   */
  readonly #held = new Map<string, { written: Promise<void>; released: boolean }>();

  constructor(
    tenantId: string,
    source: string,
    sink: EventSink,
    provisionals: ProvisionalStore,
    logger: RecorderLogger,
    clock: () => Date = () => new Date(),
  ) {
    this.#tenantId = tenantId;
    this.#source = source;
    this.#sink = sink;
    this.#provisionals = provisionals;
    this.#logger = logger;
    this.#clock = clock;
  }

  async opened(envelope: LocalEnvelope): Promise<void> {
    const data: EnvelopeOpened = {
      tenant_id: this.#tenantId,
      envelope_id: envelope.envelopeId,
      execution_id: envelope.executionId,
      budget_id: envelope.budgetId,
      status: 'AUTHORIZED',
      adapter_type: 'proxy',
      source: this.#source,
      occurred_at: this.#clock().toISOString(),
    };
    await this.#append(
      msgIds.proxyOpened(this.#tenantId, envelope.envelopeId),
      subjects.envelopeCreated(this.#tenantId),
      data,
    );
  }

  /**
   * Room for one usage event of a call about to be made, or null when the outbox cannot promise
   * it (full: the bus has been away); the call's `usage` takes it.
   */
  usageRoom(): Promise<OutboxRoom | null> {
    return this.#sink.reserveRoom(1, USAGE_EVENT_BYTES);
  }

  /**
   * Records a usage event under `eventId` (new by default). When a provisional event of that id
   * is held, this one replaces it: written to the outbox once that one is written, which is then
   * removed; one already released stands instead, and this one is not written.
   */
  async usage(
    envelope: LocalEnvelope,
    record: UsageRecord,
    room?: OutboxRoom,
    eventId: string = timeOrderedUuid(),
  ): Promise<string> {
    const event = this.#usageEvent(envelope, record, eventId);
    const held = this.#held.get(event.id);
    if (held === undefined) {
      await this.#track(event, this.#sink.append(event, room));
      return eventId;
    }
    this.#held.delete(event.id);
    if (held.released) {
      room?.release();
      return eventId;
    }
    await this.#track(
      event,
      held.written.then(() => this.#replace(event, room)),
    );
    return eventId;
  }

  /**
   * Writes a usage event where a restart finds it, without publishing it: the charge that stands
   * for a call whose own is not known yet (an answer cut and still being drained). The write is
   * handed to the store at once (before this returns). `usage` with the same event id replaces it,
   * also when called before it is written, by waiting for it; should the process end first, the
   * next start publishes it (`releaseProvisional`). Both carry one event id, so the control plane
   * counts the call once whichever of them reaches it. Resolves once it is written (or failed,
   * logged).
   */
  provisional(envelope: LocalEnvelope, record: UsageRecord, eventId: string): Promise<void> {
    const event = this.#usageEvent(envelope, record, eventId);
    const written = this.#track(event, this.#provisionals.put(event));
    this.#held.set(event.id, { written, released: false });
    return written;
  }

  /**
   * Drops the provisional event of `eventId`, if one is held: the call it stood for is not
   * charged after all (the provider refused it, or it never reached the provider). One released
   * already stands.
   */
  withdraw(eventId: string): void {
    const id = msgIds.event(this.#tenantId, eventId);
    const held = this.#held.get(id);
    if (held === undefined) return;
    this.#held.delete(id);
    if (held.released) return;
    void this.#track(
      { id },
      held.written.then(() => this.#remove(id)),
    );
  }

  /**
   * Hands every provisional event still held to the outbox: at start, those a process that ended
   * while it drained left behind; at close, those of the answers still being drained, whose
   * provisional charge then stands. One the outbox refuses stays held for the next start.
   */
  async releaseProvisional(): Promise<void> {
    await Promise.all([...this.#held.values()].map((held) => held.written));
    for (const held of this.#held.values()) held.released = true;
    for (const event of this.#provisionals.all()) await this.#track(event, this.#replace(event));
  }

  #usageEvent(envelope: LocalEnvelope, record: UsageRecord, eventId: string): OutboxEvent {
    const data: UsageEventMessage = {
      event_id: eventId,
      tenant_id: this.#tenantId,
      envelope_id: envelope.envelopeId,
      budget_id: envelope.budgetId,
      event_type: record.eventType,
      timestamp: this.#clock().toISOString(),
      tokens: record.tokens,
      model: record.model === null ? null : clipText(record.model, MAX_NAME_LENGTH),
      cost_usd: record.costUsd,
      payload: { ...record.payload, execution_id: envelope.executionId },
      source: this.#source,
    };
    return {
      id: msgIds.event(this.#tenantId, eventId),
      subject: subjects.event(this.#tenantId, record.eventType),
      data,
    };
  }

  /** Appends `event` to the outbox, then removes the provisional event of its id. */
  async #replace(event: OutboxEvent, room?: OutboxRoom): Promise<void> {
    await this.#sink.append(event, room);
    await this.#remove(event.id);
  }

  /**
   * Removes the provisional event `id`. One whose removal fails is published at the next start: a
   * duplicate of the call's own event, which its id makes count once, or, withdrawn, a charge of
   * a call the provider did not bill, which errs on the side of the budget.
   */
  async #remove(id: string): Promise<void> {
    await this.#provisionals.remove(id).catch((error: unknown) => {
      this.#logger.error({ event_id: id, err: (error as Error).message }, 'provisional event not removed');
    });
  }

  async violation(
    envelope: LocalEnvelope | null,
    violation: Omit<PolicyViolationMessage, 'tenant_id' | 'envelope_id' | 'occurred_at' | 'source'>,
  ): Promise<void> {
    const data: PolicyViolationMessage = {
      ...violation,
      // Named by the agent (a tool's, a model's name) or by a policy: what the control plane
      // keeps of them, so that the denial is still audited.
      denied_action: clipText(violation.denied_action, MAX_NAME_LENGTH),
      message: clipText(violation.message, MAX_TEXT_LENGTH),
      source: this.#source,
      tenant_id: this.#tenantId,
      envelope_id: envelope?.envelopeId ?? null,
      occurred_at: this.#clock().toISOString(),
    };
    await this.#append(
      msgIds.violation(this.#tenantId, timeOrderedUuid()),
      subjects.policyViolation(this.#tenantId),
      data,
    );
  }

  /** The envelope ended here (budget cut-off, TERMINATE policy): the control plane applies it. */
  async ended(envelope: LocalEnvelope, status: EnvelopeLifecycleMessage['status'], reason: string): Promise<void> {
    const data: EnvelopeLifecycleMessage = {
      tenant_id: this.#tenantId,
      envelope_id: envelope.envelopeId,
      execution_id: envelope.executionId,
      budget_id: envelope.budgetId,
      status,
      reason: clipText(reason, MAX_TEXT_LENGTH),
      force: true,
      occurred_at: this.#clock().toISOString(),
    };
    await this.#append(
      msgIds.proxyEnded(this.#tenantId, envelope.envelopeId),
      subjects.envelopeTerminated(this.#tenantId),
      data,
    );
  }

  /**
   * Resolves once every event recorded so far is committed (or refused), or null when none is
   * pending. An answer completes only after this, so a call whose answer the agent received in
   * full is on record even if the process is killed right after (docs/performance.md).
   */
  written(): Promise<unknown> | null {
    if (this.#pending.size === 0) return null;
    return Promise.all(this.#pending);
  }

  #append(id: string, subject: string, data: unknown): Promise<void> {
    const event = { id, subject, data };
    return this.#track(event, this.#sink.append(event));
  }

  /** Counts `write` of `event` among the pending until it is done; a failure is logged, not thrown. */
  #track(event: { id: string; subject?: string }, write: Promise<void>): Promise<void> {
    const done = write.then(
      () => undefined,
      (error: unknown) => {
        this.#logger.error(
          { event_id: event.id, subject: event.subject, err: (error as Error).message },
          'event not recorded',
        );
      },
    );
    this.#pending.add(done);
    void done.finally(() => this.#pending.delete(done));
    return done;
  }
}

/** Tool names for an event: each clipped, at most MAX_LIST_ITEMS of them, and how many were left out. */
export function toolNames(names: readonly string[]): { tool_calls: string[]; tool_calls_omitted?: number } {
  const kept = names.slice(0, MAX_LIST_ITEMS).map((name) => clipText(name, MAX_NAME_LENGTH));
  return names.length > kept.length
    ? { tool_calls: kept, tool_calls_omitted: names.length - kept.length }
    : { tool_calls: kept };
}
