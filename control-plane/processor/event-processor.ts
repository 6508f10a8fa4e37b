import type { Logger } from 'pino';
import type { z } from 'zod';
import type { BusMessage, Messaging, SetAside, Subscription } from '../../core/bus/bus.ts';
import {
  emptyCostTotals,
  IdSchema,
  isFinal,
  isTerminated,
  MAX_ID_LENGTH,
  TenantIdSchema,
  type Envelope,
} from '../../core/domain/index.ts';
import { isSvcError } from '../../core/errors/index.ts';
import {
  EnvelopeLifecycleMessageSchema,
  PolicyViolationMessageSchema,
  UsageEventMessageSchema,
  type EnvelopeLifecycleMessage,
  type PolicyViolationMessage,
  type UsageEventMessage,
} from '../../core/events/messages.ts';
import { EnvelopeOpenedSchema, type EnvelopeOpened } from '../../core/sync/contract.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { Effects } from '../effects/effects.ts';
import { applyTransition, budgetIndexId } from '../envelopes/lifecycle.ts';
import type { Store } from '../store/store.ts';
import { applyUsage, type UsageDeps } from '../usage/apply-usage.ts';

export interface ProcessorOptions {
  batchSize: number;
  maxWaitMs: number;
}

export interface ProcessorStats {
  batches: number;
  applied: number;
  duplicates: number;
  rejected: number;
}

/** A message that validated, by family. */
type Command =
  | { kind: 'opened'; message: BusMessage; data: EnvelopeOpened }
  /** The control plane's own announcement of an envelope it created: nothing to apply. */
  | { kind: 'announced'; message: BusMessage }
  | { kind: 'violation'; message: BusMessage; data: PolicyViolationMessage }
  | { kind: 'ended'; message: BusMessage; data: EnvelopeLifecycleMessage }
  | { kind: 'usage'; message: BusMessage; data: UsageEventMessage };

/** Why a payload did not validate: field paths and issue codes only, never the values. */
function invalidReason(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.code}`)
    .join('; ');
}

/**
 * The event processor: a durable consumer of every tenant's usage events and proxy-opened
 * envelopes. Each batch is applied to LMDB in one transaction and acknowledged after it commits,
 * so a crash redelivers the batch and the event-id de-duplication makes the replay count once.
 * A message that does not validate (or names another tenant than its subject) is handed back to
 * the bus to be set aside: counted, logged and dead-lettered, never silently dropped. A batch
 * whose transaction fails is retried by the bus one message at a time; one that fails alone with
 * an error retrying cannot cure is set aside at once.
 */
export class EventProcessor {
  readonly stats: ProcessorStats = { batches: 0, applied: 0, duplicates: 0, rejected: 0 };
  private readonly deps: UsageDeps & {
    store: Store;
    messaging: Messaging;
    effects: EffectDispatcher;
    logger: Logger;
    clock: () => Date;
  };
  private readonly subscriptions: Subscription[] = [];

  constructor(deps: EventProcessor['deps']) {
    this.deps = deps;
  }

  async start(options: ProcessorOptions): Promise<void> {
    const { bus } = this.deps.messaging;
    this.subscriptions.push(
      await bus.consumeBatches('svc.*.envelopes.created', 'envelope-opener', options, (batch) => this.apply(batch)),
    );
    this.subscriptions.push(
      await bus.consumeBatches('svc.*.events.>', 'event-processor', options, (batch) => this.apply(batch)),
    );
    this.subscriptions.push(
      await bus.consumeBatches('svc.*.envelopes.terminated', 'envelope-terminator', options, (batch) =>
        this.apply(batch),
      ),
    );
    this.subscriptions.push(
      await bus.consumeBatches('svc.*.policies.violation', 'violation-auditor', options, (batch) => this.apply(batch)),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.subscriptions.splice(0).map((s) => s.unsubscribe()));
  }

  private async apply(batch: BusMessage[]): Promise<SetAside[]> {
    const refused: SetAside[] = [];
    const commands: Command[] = [];
    for (const message of batch) {
      const parsed = this.validate(message);
      if (typeof parsed === 'string') refused.push({ message, reason: parsed });
      else commands.push(parsed);
    }
    this.stats.rejected += refused.length;
    this.stats.batches += 1;
    if (commands.length === 0) return refused;
    const now = this.deps.clock();
    try {
      await this.deps.effects.commit(
        (effects) => {
          for (const command of commands) this.applyOne(command, now, effects);
        },
        { batch: true },
      );
    } catch (error) {
      // Alone, and failing with a code that says it never will succeed: no point in retrying it.
      const [only] = commands;
      if (commands.length === 1 && only !== undefined && isSvcError(error) && !error.spec.retryable) {
        this.stats.rejected += 1;
        return [...refused, { message: only.message, reason: error.code }];
      }
      throw error;
    }
    return refused;
  }

  /**
   * The message as a command, or why it is refused. The tenant is the subject's; like every part of
   * a message that becomes a storage key, it must be one that can be (a tenant id).
   */
  private validate(message: BusMessage): Command | string {
    const tenant = message.subject.split('.')[1] ?? '';
    if (!TenantIdSchema.safeParse(tenant).success) return 'subject: the tenant is not a tenant id';
    const check = <T extends { tenant_id: string }>(
      schema: z.ZodType<T>,
    ): { ok: true; data: T } | { ok: false; reason: string } => {
      const parsed = schema.safeParse(message.data);
      if (!parsed.success) return { ok: false, reason: invalidReason(parsed.error) };
      if (parsed.data.tenant_id !== tenant) return { ok: false, reason: 'tenant_id: differs from the subject tenant' };
      return { ok: true, data: parsed.data };
    };
    if (message.subject.endsWith('.envelopes.created')) {
      const result = check(EnvelopeOpenedSchema);
      if (result.ok) return { kind: 'opened', message, data: result.data };
      return check(EnvelopeLifecycleMessageSchema).ok ? { kind: 'announced', message } : result.reason;
    }
    if (message.subject.endsWith('.policies.violation')) {
      // Its msg id is its de-duplication key.
      if (message.msgId.length > MAX_ID_LENGTH) return 'msg_id: too_big';
      const result = check(PolicyViolationMessageSchema);
      return result.ok ? { kind: 'violation', message, data: result.data } : result.reason;
    }
    if (message.subject.endsWith('.envelopes.terminated')) {
      const result = check(EnvelopeLifecycleMessageSchema);
      return result.ok ? { kind: 'ended', message, data: result.data } : result.reason;
    }
    const result = check(UsageEventMessageSchema);
    return result.ok ? { kind: 'usage', message, data: result.data } : result.reason;
  }

  private applyOne(command: Command, now: Date, effects: Effects): void {
    if (command.kind === 'announced') return;
    if (command.kind === 'opened') return this.openEnvelope(command.data, now);
    if (command.kind === 'violation') return this.auditViolation(command.data, command.message.msgId);
    if (command.kind === 'ended') return this.endEnvelope(command.data, now, effects);
    const event = command.data;
    const tenant = event.tenant_id;
    // A replay changes nothing, not even by opening the envelope it names (which may differ).
    if (this.deps.store.get(tenant, 'event', event.event_id) !== undefined) {
      this.stats.duplicates += 1;
      return;
    }
    if (this.deps.store.get(tenant, 'envelope', event.envelope_id) === undefined && event.budget_id !== null) {
      this.openEnvelope(
        {
          tenant_id: tenant,
          envelope_id: event.envelope_id,
          execution_id: typeof event.payload.execution_id === 'string' ? event.payload.execution_id : event.envelope_id,
          budget_id: event.budget_id,
          adapter_type: 'proxy',
          source: event.source,
          occurred_at: event.timestamp,
        },
        now,
      );
    }
    const result = applyUsage(this.deps, event, now, effects, false);
    if (result.duplicate) this.stats.duplicates += 1;
    else this.stats.applied += 1;
  }

  /**
   * A denial at a proxy enters the tenant's audit log here; the control plane audits its own
   * evaluations when it makes them. The message id guards against auditing a redelivery twice.
   */
  private auditViolation(violation: PolicyViolationMessage, msgId: string): void {
    if (violation.source === 'control-plane') return;
    const { store, audit } = this.deps;
    if (store.get(violation.tenant_id, 'meta', `violation/${msgId}`) !== undefined) return;
    store.put(violation.tenant_id, 'meta', `violation/${msgId}`, true);
    audit.append(violation.tenant_id, {
      actor: { type: 'proxy', id: violation.source },
      action: 'policy.evaluate',
      resource:
        violation.envelope_id !== null
          ? { type: 'envelope', id: violation.envelope_id }
          : { type: 'action', id: violation.denied_action },
      result: violation.decision.toLowerCase(),
      metadata: {
        action: violation.denied_action,
        matched_policy: violation.policy_id,
        matched_rule: violation.rule_id,
        message: violation.message,
        observed_at: violation.occurred_at,
        ...(violation.semantic === undefined ? {} : { semantic: violation.semantic }),
      },
    });
  }

  /**
   * A proxy ended an envelope (a budget cut-off mid-stream, a TERMINATE policy): end it here too,
   * so that every other proxy carrying it is signalled. The control plane's own announcements of
   * terminations come back on this subject as well and find the envelope already ended.
   */
  private endEnvelope(ended: EnvelopeLifecycleMessage, now: Date, effects: Effects): void {
    if (!isTerminated(ended.status)) return;
    if (this.deps.store.get(ended.tenant_id, 'envelope', ended.envelope_id) === undefined) {
      this.openEnvelope({ ...ended, adapter_type: 'proxy', source: 'proxy' }, now);
    }
    const envelope = this.deps.store.get<Envelope>(ended.tenant_id, 'envelope', ended.envelope_id);
    if (envelope === undefined || isFinal(envelope.status)) return;
    applyTransition(
      this.deps,
      envelope,
      ended.status,
      { reason: ended.reason, actor: { type: 'proxy', id: 'sidecar' }, now, force: ended.force },
      effects,
    );
  }

  /** Stores an envelope a proxy opened, unless it is known already (the control plane's own, or a replay). */
  private openEnvelope(
    opened: {
      tenant_id: string;
      envelope_id: string;
      execution_id: string;
      budget_id: string | null;
      adapter_type: string;
      source: string;
      occurred_at: string;
    },
    now: Date,
  ): void {
    const { store } = this.deps;
    if (store.get(opened.tenant_id, 'envelope', opened.envelope_id) !== undefined) return;
    // The execution index is keyed by it: one that is not an id (a proxy passes on what an agent's
    // header said) gives way to the envelope's own, rather than fail the batch or lose the envelope.
    const named = IdSchema.safeParse(opened.execution_id);
    const envelope: Envelope = {
      envelope_id: opened.envelope_id,
      tenant_id: opened.tenant_id,
      budget_id: opened.budget_id,
      execution_id: named.success ? named.data : opened.envelope_id,
      adapter_type: opened.adapter_type,
      native_ref: null,
      checkpoint_id: null,
      status: 'AUTHORIZED',
      status_reason: null,
      governance: { token_limit: null, cost_limit_usd: null, timeout_seconds: null, policy_set: [] },
      metadata: { source: opened.source },
      cost: emptyCostTotals(),
      created_at: opened.occurred_at,
      updated_at: now.toISOString(),
      completed_at: null,
    };
    store.put(opened.tenant_id, 'envelope', envelope.envelope_id, envelope);
    if (store.get(opened.tenant_id, 'execution', envelope.execution_id) === undefined)
      store.put(opened.tenant_id, 'execution', envelope.execution_id, envelope.envelope_id);
    if (envelope.budget_id !== null)
      store.put(
        opened.tenant_id,
        'budget_envelope',
        budgetIndexId(envelope.budget_id, envelope.envelope_id),
        envelope.envelope_id,
      );
  }
}
