import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { SvcError } from '../../core/errors/index.ts';
import {
  timeOrderedUuid,
  canTransition,
  emptyCostTotals,
  EnvelopeStatusSchema,
  isFinal,
  isTerminated,
  percents,
  type CreateEnvelopeRequest,
  type Envelope,
  type EnvelopeStatus,
  type EventRecord,
} from '../../core/domain/index.ts';
import { UsageEventMessageSchema } from '../../core/events/messages.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import type { Budgets } from '../budgets/budgets.ts';
import { requireScope } from '../auth/scopes.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { Page, PageRequest, Readers, Storage } from '../storage/storage.ts';
import { applyUsage, type UsageDeps } from '../usage/apply-usage.ts';
import { applyTransition, lifecycleMessage, pausedByImmuneSystem } from './lifecycle.ts';
import type { PolicyGate } from './policy-gate.ts';

/** How often a status change is tried again when another transaction moved the envelope first. */
const MOVE_ATTEMPTS = 3;

export interface EnvelopeDeps extends UsageDeps {
  storage: Storage;
  audit: AuditLog;
  budgets: Budgets;
  policies: PolicyGate;
  effects: EffectDispatcher;
  clock: () => Date;
}

/** Execution envelopes: flows 1 to 3 of spec section 1 and the transitions of 3.1. */
export class Envelopes {
  private readonly deps: EnvelopeDeps;

  constructor(deps: EnvelopeDeps) {
    this.deps = deps;
  }

  /**
   * Policy check (`execution:start`), then budget validation, then the envelope: AUTHORIZED as
   * REST opens it, or PENDING as gRPC CreateEnvelope shows it (spec 3.1), to be moved on with
   * UpdateEnvelopeStatus.
   */
  async create(
    caller: Caller,
    request: CreateEnvelopeRequest,
    initial: 'AUTHORIZED' | 'PENDING' = 'AUTHORIZED',
  ): Promise<Envelope> {
    const { audit, budgets, clock } = this.deps;
    // Narrowing the policies that govern an execution is the policy author's to decide, not the
    // governed party's: a key that may only start executions could name a set without its denials.
    if (request.policy_set !== undefined && request.policy_set.length > 0)
      requireScope(caller.principal, 'policies:write', {
        act: 'policy_set, narrowing the policies that apply,',
        details: { field: 'policy_set' },
      });
    const budget = request.budget_id === undefined ? undefined : await budgets.find(caller.tenant, request.budget_id);
    const context = {
      tenant_id: caller.tenant,
      adapter_type: request.adapter_type,
      budget_id: request.budget_id ?? null,
      // The workflow a budget is scoped to is the execution's: the caller cannot name another.
      ...(budget?.workflow_id == null ? {} : { workflow_id: budget.workflow_id }),
      execution_id: request.execution_id ?? null,
      metadata: request.metadata ?? {},
      tool_name: request.metadata?.tool_name,
      model_id: request.metadata?.model_name ?? request.metadata?.model_id,
      request: { adapter_type: request.adapter_type, metadata: request.metadata ?? {} },
      budget: budget === undefined ? undefined : { percent_used: percents(budget).highest },
    };
    const decision = await this.deps.policies.prepare(caller, {
      action: 'execution:start',
      context,
      policySet: request.policy_set,
    });
    const { result } = decision;
    if (!result.allowed) {
      const approvalId = await this.deps.effects.commit((tx, effects) => decision.record(tx, effects));
      decision.recorded();
      if (approvalId !== null) {
        throw new SvcError('SVC-POL-2004', `execution:start requires approval ${approvalId}`, {
          approval_id: approvalId,
          policy_id: result.matched_policy ?? '',
          denied_action: 'execution:start',
        });
      }
      throw new SvcError('SVC-POL-2001', result.message ?? result.reason, {
        policy_id: result.matched_policy ?? '',
        rule_id: result.matched_rule,
        denied_action: 'execution:start',
      });
    }

    // The decision and the envelope commit together: one durable commit per creation.
    const creation = this.deps.effects.commit(async (tx, effects) => {
      await decision.record(tx, effects);
      const now = clock();
      const envelopeId = timeOrderedUuid(now);
      const created: Envelope = {
        envelope_id: envelopeId,
        tenant_id: caller.tenant,
        budget_id: request.budget_id ?? null,
        execution_id: request.execution_id ?? envelopeId,
        adapter_type: request.adapter_type,
        native_ref: request.native_ref ?? null,
        checkpoint_id: null,
        status: initial,
        status_reason: null,
        governance: {
          token_limit: request.governance_context?.token_limit ?? null,
          cost_limit_usd: request.governance_context?.cost_limit_usd ?? null,
          timeout_seconds: request.governance_context?.timeout_seconds ?? null,
          policy_set: request.policy_set ?? [],
        },
        metadata: request.metadata ?? {},
        cost: emptyCostTotals(),
        created_at: now.toISOString(),
        updated_at: now.toISOString(),
        completed_at: null,
      };
      // A taken execution id is refused before the budget is touched.
      await tx.envelopes.insert(caller.tenant, created, { executionTaken: 'refuse' });
      if (request.budget_id !== undefined) {
        await budgets.reserveExecution(tx, caller.tenant, request.budget_id, budget);
        effects.changes.push({ kind: 'budget', tenant: caller.tenant, budgetId: request.budget_id });
      }
      await audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'envelope.create',
        resource: { type: 'envelope', id: envelopeId },
        result: initial.toLowerCase(),
        metadata: { budget_id: created.budget_id, adapter_type: created.adapter_type },
      });
      effects.publications.push({
        subject: subjects.envelopeCreated(caller.tenant),
        data: lifecycleMessage(created),
        msgId: msgIds.envelope(caller.tenant, envelopeId, 'CREATED'),
      });
      return created;
    });
    const envelope = await creation.catch(async (error: unknown) => {
      // The envelope was refused (a taken execution id, an exhausted budget): the decision that
      // let it through is recorded still.
      await this.deps.effects.commit((tx, effects) => decision.record(tx, effects));
      decision.recorded();
      throw error;
    });
    decision.recorded();
    return envelope;
  }

  async get(tenant: string, envelopeId: string, from: Readers = this.deps.storage.read): Promise<Envelope> {
    const envelope = await from.envelopes.get(tenant, envelopeId);
    if (envelope === undefined)
      throw new SvcError('SVC-ENV-1001', `envelope ${envelopeId} not found`, { envelope_id: envelopeId });
    return envelope;
  }

  list(
    tenant: string,
    filter: { status?: EnvelopeStatus | undefined; budget_id?: string | undefined },
    page: PageRequest,
  ): Promise<Page<Envelope>> {
    return this.deps.storage.read.envelopes.list(tenant, { status: filter.status, budgetId: filter.budget_id }, page);
  }

  /** Records an event (202): updates the cost summary and budget usage, fires alerts. */
  async recordEvent(
    caller: Caller,
    envelopeId: string,
    record: EventRecord,
  ): Promise<{ event_id: string; duplicate: boolean; envelope: Envelope }> {
    const message = UsageEventMessageSchema.parse({
      event_id: record.event_id ?? timeOrderedUuid(),
      tenant_id: caller.tenant,
      envelope_id: envelopeId,
      event_type: record.event_type,
      timestamp: record.timestamp,
      tokens: { input: record.tokens?.input ?? 0, output: record.tokens?.output ?? 0 },
      model: record.model ?? null,
      cost_usd: record.cost_usd ?? null,
      payload: record.payload ?? {},
      source: 'rest',
    });
    const outcome = await this.deps.effects.commit(async (tx, effects) => {
      const envelope = await this.get(caller.tenant, envelopeId, tx);
      // The budget the event is charged to, as every event on the bus names it.
      const charged = { ...message, budget_id: envelope.budget_id };
      const applied = await applyUsage(this.deps, tx, charged, this.deps.clock(), effects, true);
      // The event itself goes out first, before what it caused (alerts, status changes).
      if (!applied.duplicate) {
        effects.publications.unshift({
          subject: subjects.event(caller.tenant, message.event_type),
          data: charged,
          msgId: msgIds.event(caller.tenant, message.event_id),
        });
      }
      return { ...applied, envelope: applied.envelope ?? (await this.get(caller.tenant, envelopeId, tx)) };
    });
    return { event_id: message.event_id, duplicate: outcome.duplicate, envelope: outcome.envelope };
  }

  /** POST /terminate: any non-final envelope becomes TERMINATED; an ended one is 409. */
  async terminate(
    caller: Caller,
    envelopeId: string,
    request: { reason?: string | undefined; force: boolean },
  ): Promise<Envelope> {
    return this.move(caller, envelopeId, 'TERMINATED', request.reason ?? 'terminated by request', request.force);
  }

  /** The HTTP face of gRPC UpdateEnvelopeStatus: only the moves of spec 3.1. */
  async updateStatus(
    caller: Caller,
    envelopeId: string,
    request: { status: string; reason?: string | undefined },
  ): Promise<Envelope> {
    const parsed = EnvelopeStatusSchema.safeParse(request.status);
    if (!parsed.success) {
      throw new SvcError('SVC-SYS-9002', `invalid request: status: unknown status ${request.status}`, {}, [
        { field: 'status', description: `one of ${EnvelopeStatusSchema.options.join(', ')}` },
      ]);
    }
    return this.move(caller, envelopeId, parsed.data, request.reason ?? null, false);
  }

  private async move(
    caller: Caller,
    envelopeId: string,
    to: EnvelopeStatus,
    reason: string | null,
    force: boolean,
  ): Promise<Envelope> {
    return this.deps.effects.commit(async (tx, effects) => {
      for (let attempt = 1; ; attempt++) {
        const current = await this.get(caller.tenant, envelopeId, tx);
        if (isFinal(current.status)) {
          const code = isTerminated(current.status) ? 'SVC-ENV-1003' : 'SVC-ENV-1004';
          // The status is named in details.state, which each surface words its own way.
          throw new SvcError(code, `envelope ${envelopeId} has already ended`, {
            envelope_id: envelopeId,
            state: current.status,
          });
        }
        // The agent the envelope governs holds envelopes:write: lifting its own quarantine is not its call.
        if (to === 'RUNNING' && pausedByImmuneSystem(current))
          requireScope(caller.principal, 'policies:write', {
            act: `resuming envelope ${envelopeId}, paused by the Immune System (${current.status_reason ?? ''}),`,
            details: { envelope_id: envelopeId },
          });
        if (!canTransition(current.status, to)) {
          throw new SvcError('SVC-ENV-1002', `envelope ${envelopeId} cannot move from ${current.status} to ${to}`, {
            envelope_id: envelopeId,
            from: current.status,
            to,
          });
        }
        const moved = await applyTransition(
          this.deps,
          tx,
          current,
          to,
          { reason, actor: actorOf(caller.principal), now: this.deps.clock(), force },
          effects,
        );
        if (moved !== undefined) return moved;
        if (attempt === MOVE_ATTEMPTS)
          throw new SvcError('SVC-SYS-9001', `envelope ${envelopeId} keeps changing; try again`, {
            envelope_id: envelopeId,
          });
      }
    });
  }
}
