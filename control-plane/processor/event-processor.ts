import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { BusMessage, Messaging, SetAside, Subscription } from '../../core/bus/bus.ts';
import { subjectTenantId } from '../../core/bus/subjects.ts';
import {
  canTransition,
  emptyCostTotals,
  IdSchema,
  isFinal,
  isoTime,
  isTerminated,
  MAX_ID_LENGTH,
} from '../../core/domain/index.ts';
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
import { applyTransition, immunePauseReason } from '../envelopes/lifecycle.ts';
import type { Repositories } from '../storage/storage.ts';
import type { StoredEvent } from '../storage/records.ts';
import { refusedValue } from '../storage/refused-value.ts';
import { isStorageUnreachable } from '../storage/unreachable.ts';
import { actsOn, applyUsage, chargedBudget, storedEvent, type UsageDeps } from '../usage/apply-usage.ts';
import { evaluationEntry } from '../policies/evaluation-record.ts';
import { batchRepositories } from './batch-repositories.ts';

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

/** The first wait for an unreachable store, doubled on each try up to the longest. */
const UNREACHABLE_FIRST_WAIT_MS = 100;
const UNREACHABLE_MAX_WAIT_MS = 5_000;

/**
 * The de-duplication scope of proxies' violation messages: a redelivery is recognised while the
 * event stream can redeliver it, which is what retention keeps these entries for.
 */
export const VIOLATION_DEDUP_SCOPE = 'violation';

/**
 * The event processor: a durable consumer of every tenant's usage events and proxy-opened
 * envelopes. Each batch is applied in one storage transaction and acknowledged after it commits,
 * so a crash redelivers the batch and the event-id de-duplication makes the replay count once.
 * The next batch is applied while one commits (each is still acknowledged after its own commit).
 * A message that does not validate (or names another tenant than its subject) is handed back to
 * the bus to be set aside: counted, logged and dead-lettered, never silently dropped. A batch
 * whose transaction fails is retried by the bus one message at a time; one that fails alone with
 * an error retrying cannot cure is set aside at once.
 */
export class EventProcessor {
  readonly stats: ProcessorStats = { batches: 0, applied: 0, duplicates: 0, rejected: 0 };
  private readonly deps: UsageDeps & {
    messaging: Messaging;
    effects: EffectDispatcher;
    logger: Logger;
    clock: () => Date;
  };
  private readonly subscriptions: Subscription[] = [];
  private stopping = false;

  constructor(deps: EventProcessor['deps']) {
    this.deps = deps;
  }

  async start(options: ProcessorOptions): Promise<void> {
    const { bus } = this.deps.messaging;
    const consumers = [
      ['svc.*.envelopes.created', 'envelope-opener'],
      ['svc.*.events.>', 'event-processor'],
      ['svc.*.envelopes.terminated', 'envelope-terminator'],
      ['svc.*.policies.violation', 'violation-auditor'],
    ] as const;
    for (const [pattern, durable] of consumers)
      this.subscriptions.push(
        await bus.consumeBatches(pattern, durable, options, (batch, applied) => this.apply(batch, applied)),
      );
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.subscriptions.splice(0).map((s) => s.unsubscribe()));
  }

  /**
   * `applied` is called once the batch's transaction has done its work: the bus may then hand over
   * the next batch, whose transaction follows this one while this one's commit becomes durable.
   */
  private async apply(batch: BusMessage[], applied: () => void): Promise<SetAside[]> {
    const refused: SetAside[] = [];
    // Let go once the transaction has taken them: held until the commit is durable, the batch's
    // validated copies were much of what survived into the old generation. An attempt after the
    // first validates the batch again (the same messages give the same commands).
    let validated: Command[] | undefined = [];
    for (const message of batch) {
      const parsed = this.validate(message);
      if (typeof parsed === 'string') refused.push({ message, reason: parsed });
      else validated.push(parsed);
    }
    this.stats.rejected += refused.length;
    this.stats.batches += 1;
    if (validated.length === 0) return refused;
    const only = validated.length === 1 ? validated[0]!.message : undefined;
    try {
      const counted = await this.whileUnreachable(() =>
        this.deps.effects.commit(async (transaction, effects) => {
          const commands = validated ?? this.commandsOf(batch);
          validated = undefined;
          const now = this.deps.clock();
          const repositories = batchRepositories(transaction);
          const tally = { applied: 0, duplicates: 0 };
          const fresh = await this.recordEvents(repositories.tx, commands, now);
          for (const command of commands) await this.applyOne(repositories.tx, command, now, effects, tally, fresh);
          await repositories.flush();
          applied();
          return tally;
        }),
      );
      this.stats.applied += counted.applied;
      this.stats.duplicates += counted.duplicates;
    } catch (error) {
      // Alone, and failing on what it would store, which no retry changes: set aside at once
      // rather than holding every tenant's messages behind it for its redeliveries.
      const reason = refusedValue(error);
      if (only !== undefined && reason !== undefined) {
        this.stats.rejected += 1;
        return [...refused, { message: only, reason }];
      }
      throw error;
    }
    return refused;
  }

  /** The batch's messages that validate, as commands. */
  private commandsOf(batch: readonly BusMessage[]): Command[] {
    return batch.flatMap((message) => {
      const parsed = this.validate(message);
      return typeof parsed === 'string' ? [] : [parsed];
    });
  }

  /**
   * Runs `attempt` again, with backoff, for as long as the store cannot be reached: an outage is
   * no fault of the batch, and the bus would otherwise count it against the batch's messages and
   * set them aside within seconds (a database failover would drop every event it spans). The bus
   * keeps the batch's messages alive meanwhile. Given up only when the processor stops.
   */
  private async whileUnreachable<T>(attempt: () => Promise<T>): Promise<T> {
    for (let retry = 0; ; retry++) {
      try {
        return await attempt();
      } catch (error) {
        if (!isStorageUnreachable(error) || this.stopping) throw error;
        if (retry === 0) this.deps.logger.warn({ err: error }, 'store unreachable; the batch waits for it');
        await sleep(Math.min(UNREACHABLE_MAX_WAIT_MS, UNREACHABLE_FIRST_WAIT_MS * 2 ** retry));
      }
    }
  }

  /**
   * The message as a command, or why it is refused. The tenant is the subject's; like every part of
   * a message that becomes a storage key, it must be one that can be (a tenant id).
   */
  private validate(message: BusMessage): Command | string {
    const tenant = subjectTenantId(message.subject);
    if (tenant === undefined) return 'subject: the tenant is not a tenant id';
    const check = <T extends { tenant_id: string }>(
      schema: z.ZodType<T>,
    ): { ok: true; data: T } | { ok: false; reason: string } => {
      const parsed = schema.safeParse(message.data);
      if (!parsed.success) return { ok: false, reason: invalidReason(parsed.error) };
      if (parsed.data.tenant_id !== tenant) return { ok: false, reason: 'tenant_id: differs from the subject tenant' };
      return { ok: true, data: parsed.data };
    };
    if (message.subject.endsWith('.envelopes.created')) {
      // An envelope opened over REST or gRPC is announced without the `source` an opened one must
      // name: it is checked as an announcement first, sparing the check as an opened one, bound to
      // fail and costly in failing. Refused, a message gives the reason it is no opened one.
      const named = typeof message.data !== 'object' || message.data === null || 'source' in message.data;
      if (!named && check(EnvelopeLifecycleMessageSchema).ok) return { kind: 'announced', message };
      const opened = check(EnvelopeOpenedSchema);
      if (opened.ok) return { kind: 'opened', message, data: opened.data };
      if (named && check(EnvelopeLifecycleMessageSchema).ok) return { kind: 'announced', message };
      return opened.reason;
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

  /**
   * Stores the batch's usage events not stored before, one statement per tenant, and returns them
   * (as stored) by the command that carries each; an id seen earlier, in storage or in the batch,
   * is a replay. Storing them before the batch's other commands apply changes nothing those read.
   * `tx` is the batch's: the envelopes the new events name are read into it at once.
   */
  private async recordEvents(tx: Repositories, commands: Command[], now: Date): Promise<Map<Command, StoredEvent>> {
    const at = isoTime(now);
    const byTenant = new Map<string, { command: Command; stored: StoredEvent }[]>();
    for (const command of commands) {
      if (command.kind !== 'usage') continue;
      const list = byTenant.get(command.data.tenant_id) ?? [];
      list.push({ command, stored: storedEvent(this.deps, command.data, at) });
      byTenant.set(command.data.tenant_id, list);
    }
    const fresh = new Map<Command, StoredEvent>();
    for (const [tenant, list] of byTenant) {
      const inserted = new Set(
        await tx.events.insertNew(
          tenant,
          list.map((entry) => entry.stored),
        ),
      );
      const named: StoredEvent[] = [];
      for (const { command, stored } of list) {
        // The first of the batch's messages with an id counts; the ones after it are replays.
        if (!inserted.delete(stored.event_id)) continue;
        fresh.set(command, stored);
        named.push(stored);
      }
      // Their budgets, then their envelopes, each held in one statement (budgets first, as every
      // writer takes them): the batch's repositories then sum their changes in memory and write
      // each once, at the end.
      const envelopeIds = named.map((stored) => stored.envelope_id);
      const envelopes = await tx.envelopes.getMany(tenant, envelopeIds);
      const budgetOf = new Map(envelopes.map((e) => [e.envelope_id, e.budget_id]));
      const budgets = named.flatMap((stored) => chargedBudget(stored, budgetOf.get(stored.envelope_id)) ?? []);
      await tx.budgets.getManyForUpdate(tenant, budgets);
      await tx.envelopes.getManyForUpdate(tenant, envelopeIds);
    }
    return fresh;
  }

  private async applyOne(
    tx: Repositories,
    command: Command,
    now: Date,
    effects: Effects,
    tally: { applied: number; duplicates: number },
    fresh: Map<Command, StoredEvent>,
  ): Promise<void> {
    if (command.kind === 'announced') return;
    if (command.kind === 'opened') return this.openEnvelope(tx, command.data, now);
    if (command.kind === 'violation') return this.auditViolation(tx, command.data, command.message.msgId, now);
    if (command.kind === 'ended') return this.endEnvelope(tx, command.data, now, effects);
    const event = command.data;
    const recorded = fresh.get(command);
    // A replay changes nothing, not even by opening the envelope it names (which may differ).
    if (recorded === undefined) {
      tally.duplicates += 1;
      return;
    }
    if (event.budget_id !== null) {
      await this.openEnvelope(
        tx,
        {
          tenant_id: event.tenant_id,
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
    await applyUsage(this.deps, tx, event, now, effects, false, recorded);
    if (event.event_type === 'immune.anomaly' && event.payload.action === 'pause') {
      await this.pauseEnvelope(tx, event, now, effects);
    }
    tally.applied += 1;
  }

  /**
   * A proxy's Immune System paused an envelope (`proxy_anomaly_action=pause`) and holds its calls:
   * record it PAUSED here, so that it shows as paused and is resumed by UpdateEnvelopeStatus
   * RUNNING, which signals the proxies to release the calls. Only a running (or authorized)
   * envelope pauses; one ended or paused already stays as it is.
   */
  private async pauseEnvelope(tx: Repositories, event: UsageEventMessage, now: Date, effects: Effects): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const envelope = await tx.envelopes.get(event.tenant_id, event.envelope_id);
      if (envelope === undefined || !canTransition(envelope.status, 'PAUSED')) return;
      if (!actsOn(event, envelope, 'pause', effects)) return;
      const reason = immunePauseReason(typeof event.payload.kind === 'string' ? event.payload.kind : 'rate');
      const moved = await applyTransition(
        this.deps,
        tx,
        envelope,
        'PAUSED',
        { reason, actor: { type: 'proxy', id: event.source }, now },
        effects,
      );
      if (moved !== undefined) return;
    }
  }

  /**
   * A denial at a proxy enters the tenant's audit log here; the control plane audits its own
   * evaluations when it makes them. The message id guards against auditing a redelivery twice.
   */
  private async auditViolation(
    tx: Repositories,
    violation: PolicyViolationMessage,
    msgId: string,
    now: Date,
  ): Promise<void> {
    if (violation.source === 'control-plane') return;
    if (!(await tx.dedup.markProcessed(violation.tenant_id, VIOLATION_DEDUP_SCOPE, msgId, now.toISOString()))) return;
    await this.deps.audit.append(
      tx,
      violation.tenant_id,
      evaluationEntry({
        actor: { type: 'proxy', id: violation.source },
        action: violation.denied_action,
        envelopeId: violation.envelope_id,
        decision: violation.decision,
        // A proxy names no policy with an empty id, as the control plane's events do.
        matchedPolicy: violation.policy_id === '' ? null : violation.policy_id,
        matchedRule: violation.rule_id,
        semantic: violation.semantic,
        more: { message: violation.message, observed_at: violation.occurred_at },
      }),
    );
  }

  /**
   * A proxy ended an envelope (a budget cut-off mid-stream, a TERMINATE policy): end it here too,
   * so that every other proxy carrying it is signalled. The control plane's own announcements of
   * terminations come back on this subject as well and find the envelope already ended.
   */
  private async endEnvelope(
    tx: Repositories,
    ended: EnvelopeLifecycleMessage,
    now: Date,
    effects: Effects,
  ): Promise<void> {
    if (!isTerminated(ended.status)) return;
    await this.openEnvelope(tx, { ...ended, adapter_type: 'proxy', source: 'proxy' }, now);
    // Read again when another transaction moved it meanwhile (it may have ended it already).
    for (let attempt = 0; attempt < 3; attempt++) {
      const envelope = await tx.envelopes.get(ended.tenant_id, ended.envelope_id);
      if (envelope === undefined || isFinal(envelope.status)) return;
      if (!actsOn(ended, envelope, 'termination', effects)) return;
      const moved = await applyTransition(
        this.deps,
        tx,
        envelope,
        ended.status,
        { reason: ended.reason, actor: { type: 'proxy', id: 'sidecar' }, now, force: ended.force },
        effects,
      );
      if (moved !== undefined) return;
    }
  }

  /** Stores an envelope a proxy opened, unless it is known already (the control plane's own, or a replay). */
  private async openEnvelope(
    tx: Repositories,
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
  ): Promise<void> {
    if ((await tx.envelopes.get(opened.tenant_id, opened.envelope_id)) !== undefined) return;
    // The execution index is keyed by it: one that is not an id (a proxy passes on what an agent's
    // header said) gives way to the envelope's own, rather than fail the batch or lose the envelope.
    const named = IdSchema.safeParse(opened.execution_id);
    await tx.envelopes.insert(
      opened.tenant_id,
      {
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
        updated_at: isoTime(now),
        completed_at: null,
      },
      // Proxies name executions as they like; one already taken keeps its envelope.
      { executionTaken: 'keep' },
    );
  }
}
