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
 */
export class EventRecorder {
  readonly #tenantId: string;
  readonly #source: string;
  readonly #sink: EventSink;
  readonly #logger: RecorderLogger;
  readonly #clock: () => Date;
  /** Events handed to the outbox and not yet committed. */
  readonly #pending = new Set<Promise<void>>();

  constructor(
    tenantId: string,
    source: string,
    sink: EventSink,
    logger: RecorderLogger,
    clock: () => Date = () => new Date(),
  ) {
    this.#tenantId = tenantId;
    this.#source = source;
    this.#sink = sink;
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

  async usage(envelope: LocalEnvelope, record: UsageRecord, room?: OutboxRoom): Promise<string> {
    const eventId = timeOrderedUuid();
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
    await this.#append(
      msgIds.event(this.#tenantId, eventId),
      subjects.event(this.#tenantId, record.eventType),
      data,
      room,
    );
    return eventId;
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

  #append(id: string, subject: string, data: unknown, room?: OutboxRoom): Promise<void> {
    const write = this.#sink.append({ id, subject, data }, room).then(
      () => undefined,
      (error: unknown) => {
        this.#logger.error({ event_id: id, subject, err: (error as Error).message }, 'event not recorded');
      },
    );
    this.#pending.add(write);
    void write.finally(() => this.#pending.delete(write));
    return write;
  }
}

/** Tool names for an event: each clipped, at most MAX_LIST_ITEMS of them, and how many were left out. */
export function toolNames(names: readonly string[]): { tool_calls: string[]; tool_calls_omitted?: number } {
  const kept = names.slice(0, MAX_LIST_ITEMS).map((name) => clipText(name, MAX_NAME_LENGTH));
  return names.length > kept.length
    ? { tool_calls: kept, tool_calls_omitted: names.length - kept.length }
    : { tool_calls: kept };
}
