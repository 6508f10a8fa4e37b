import { randomUUID } from 'node:crypto';
import { timeOrderedUuid } from '../../core/domain/index.ts';
import { sequenceOf, sequencesToTrack, type ActionHistory, type BuiltinJudge } from '../../core/brain/index.ts';
import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import type { Actor, AuditRecord } from '../../core/domain/index.ts';
import { isSvcError, SvcError, type FieldViolation } from '../../core/errors/index.ts';
import type { PolicyViolationMessage } from '../../core/events/messages.ts';
import {
  compileRuleset,
  evaluate,
  evaluateAsync,
  policyFromRestCreate,
  revisePolicy,
  type CompiledRuleset,
  type Decision,
  type EvaluationResult,
  type Policy,
  type PolicyChanges,
  type PolicyStatus,
  type RestCreatePolicyRequest,
  type SemanticJudge,
} from '../../core/policy/index.ts';
import type { Approvals } from '../approvals/approvals.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { hasScope } from '../auth/scopes.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { Effects } from '../effects/effects.ts';
import type { PolicyDecision, PolicyGate, PolicyQuestion, PreparedDecision } from '../envelopes/policy-gate.ts';
import { END_OF_WALK, filteredPage, namedPages } from '../storage/filtered-page.ts';
import { collectPages } from '../storage/paging.ts';
import type { Page, PageRequest, Repositories, Storage } from '../storage/storage.ts';
import { evaluationEntry, recordedEvaluation } from './evaluation-record.ts';

/** One evaluation of a policy, read back from its audit record. */
export interface EvaluationRecord {
  evaluation_id: string;
  evaluated_at: string;
  policy_id: string;
  rule_id: string;
  action: string;
  decision: Decision;
  /** The policy was in AUDIT: what it would have decided, recorded and not enforced. */
  shadow: boolean;
  envelope_id: string | null;
  approval_id: string | null;
  actor: Actor;
}

export interface PolicyDeps {
  storage: Storage;
  audit: AuditLog;
  effects: EffectDispatcher;
  /** The Semantic Judge each tenant chose (built-in, LLM or both). */
  judgeFor: (tenant: string) => SemanticJudge;
  /** Opens the pending approval of a REQUIRE_APPROVAL decision. */
  approvals: Approvals;
  clock: () => Date;
  /**
   * The actions each credential was allowed over REST/gRPC (keyed by tenant and credential, not
   * by the `execution_id` the caller chooses), given to later evaluations as `recent_actions`.
   */
  history: ActionHistory;
  /** Its sequence rules are tracked by the history beside the tenant's. */
  builtin: Pick<BuiltinJudge, 'sequences'>;
  /** Called after every evaluation, for metrics. */
  observe?: (result: EvaluationResult) => void;
}

/**
 * Policies: authoring, and evaluation with the one engine of core/policy. Each tenant's ruleset is
 * compiled once per version (the version is bumped by every policy write) and reused until then.
 */
export class Policies implements PolicyGate {
  private readonly deps: PolicyDeps;
  private readonly compiled = new Map<string, CompiledRuleset>();

  constructor(deps: PolicyDeps) {
    this.deps = deps;
  }

  async create(caller: Caller, request: RestCreatePolicyRequest): Promise<Policy> {
    const policy = policyFromRestCreate(request, {
      tenantId: caller.tenant,
      policyId: randomUUID(),
      now: this.deps.clock(),
    });
    await this.insert(caller, [policy]);
    return policy;
  }

  /**
   * Creates every policy or none: each is built and compiled first, and a fault in any refuses the
   * whole batch before anything is stored, naming the policy's index with the field
   * (`2.rules.0.action`). The rest goes in one transaction, with one ruleset version.
   */
  async import(caller: Caller, requests: readonly RestCreatePolicyRequest[]): Promise<Policy[]> {
    const now = this.deps.clock();
    const violations: FieldViolation[] = [];
    const built: Policy[] = [];
    requests.forEach((request, index) => {
      try {
        built.push(policyFromRestCreate(request, { tenantId: caller.tenant, policyId: randomUUID(), now }));
      } catch (error) {
        if (!isSvcError(error) || error.fieldViolations.length === 0) throw error;
        for (const v of error.fieldViolations)
          violations.push({ field: `${index}.${v.field}`, description: v.description });
      }
    });
    if (violations.length > 0)
      throw new SvcError(
        'SVC-POL-2003',
        `invalid policies, none imported: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
        { fields: violations.map((v) => v.field).join(', ') },
        violations,
      );
    await this.insert(caller, built);
    return built;
  }

  private async insert(caller: Caller, policies: readonly Policy[]): Promise<void> {
    await this.deps.effects.commit(async (tx, effects) => {
      for (const policy of policies) await tx.policies.insert(caller.tenant, policy);
      await tx.policies.bumpVersion(caller.tenant);
      for (const policy of policies) {
        await this.deps.audit.append(tx, caller.tenant, {
          actor: actorOf(caller.principal),
          action: 'policy.create',
          resource: { type: 'policy', id: policy.policy_id },
          result: 'created',
          metadata: { name: policy.name, priority: policy.priority, status: policy.status },
        });
      }
      effects.changes.push({ kind: 'ruleset', tenant: caller.tenant });
    });
  }

  /**
   * Applies changes (revisePolicy: compiled before anything is stored, SVC-POL-2003 when it could
   * not run). The revision replaces the one read only if no other came first (SVC-SYS-9001 then:
   * retry), so no change is lost between concurrent writers.
   */
  async update(caller: Caller, policyId: string, changes: PolicyChanges): Promise<Policy> {
    const now = this.deps.clock();
    return this.deps.effects.commit(async (tx, effects) => {
      const current = await tx.policies.get(caller.tenant, policyId);
      if (current === undefined) throw notFound(policyId);
      const revised = revisePolicy(current, changes, now);
      if (!(await tx.policies.replace(caller.tenant, revised, current.version)))
        throw new SvcError('SVC-SYS-9001', `policy ${policyId} was changed meanwhile; read it again and retry`, {
          policy_id: policyId,
        });
      await tx.policies.bumpVersion(caller.tenant);
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'policy.update',
        resource: { type: 'policy', id: policyId },
        result: 'updated',
        metadata: {
          changed: Object.keys(changes).filter((k) => changes[k as keyof PolicyChanges] !== undefined),
          version: revised.version,
          status: revised.status,
        },
      });
      effects.changes.push({ kind: 'ruleset', tenant: caller.tenant });
      return revised;
    });
  }

  async remove(caller: Caller, policyId: string): Promise<void> {
    await this.deps.effects.commit(async (tx, effects) => {
      if (!(await tx.policies.remove(caller.tenant, policyId))) throw notFound(policyId);
      await tx.policies.bumpVersion(caller.tenant);
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'policy.delete',
        resource: { type: 'policy', id: policyId },
        result: 'deleted',
      });
      effects.changes.push({ kind: 'ruleset', tenant: caller.tenant });
    });
  }

  async get(tenant: string, policyId: string): Promise<Policy> {
    const policy = await this.deps.storage.read.policies.get(tenant, policyId);
    if (policy === undefined) throw notFound(policyId);
    return policy;
  }

  /** Highest priority first, the older first among equals. */
  async list(tenant: string, filter: { status?: PolicyStatus | undefined } = {}): Promise<Policy[]> {
    const all = await collectPages((page) => this.deps.storage.read.policies.list(tenant, page));
    const kept = filter.status === undefined ? all : all.filter((p) => p.status === filter.status);
    return kept.sort((a, b) => b.priority - a.priority || a.created_at.localeCompare(b.created_at));
  }

  /** The tenant's current ruleset version; proxies compare it with what they hold. */
  version(tenant: string): Promise<number> {
    return this.deps.storage.read.policies.version(tenant);
  }

  /**
   * The tenant's policies as of its version. The version is read first: policies written after
   * that read carry a higher version, so a snapshot never claims a version newer than its policies.
   */
  async snapshot(tenant: string): Promise<{ version: number; policies: Policy[] }> {
    const version = await this.version(tenant);
    return { version, policies: await this.list(tenant) };
  }

  /** A `policy_set` names policies of the tenant, by id or name: an unknown one narrows to nothing. */
  async #requireKnown(tenant: string, policySet: readonly string[]): Promise<void> {
    const policies = await this.list(tenant);
    for (const [i, named] of policySet.entries()) {
      if (!policies.some((p) => p.policy_id === named || p.name === named)) {
        throw new SvcError('SVC-POL-2002', `policy_set names no policy of this tenant: ${named}`, {
          field: `policy_set.${i}`,
          policy_id: named,
        });
      }
    }
  }

  async ruleset(tenant: string): Promise<CompiledRuleset> {
    const version = await this.version(tenant);
    const cached = this.compiled.get(tenant);
    if (cached !== undefined && cached.version === version) return cached;
    const ruleset = compileRuleset(await this.list(tenant), version);
    this.compiled.set(tenant, ruleset);
    return ruleset;
  }

  /**
   * A page of the evaluations a policy decided or shadowed (AUDIT), newest first, read from the
   * audit log's `policy.evaluate` records: within [start, end) and of one decision when asked. The
   * walk ends at the first record older than `start`; a page is short where it stopped at the
   * bound on records one page reads, and its token reads on.
   */
  async evaluations(
    tenant: string,
    policyId: string,
    filter: { start?: string | undefined; end?: string | undefined; decision?: Decision | undefined },
    request: PageRequest,
  ): Promise<Page<EvaluationRecord>> {
    await this.get(tenant, policyId);
    const start = filter.start === undefined ? -Infinity : Date.parse(filter.start);
    const end = filter.end === undefined ? Infinity : Date.parse(filter.end);
    const audit = this.deps.storage.read.audit;
    const select = (record: AuditRecord): EvaluationRecord | undefined | typeof END_OF_WALK => {
      const at = Date.parse(record.timestamp);
      if (at < start) return END_OF_WALK;
      if (at >= end) return undefined;
      const evaluation = recordedEvaluation(record);
      const shadowed = evaluation.shadow.find((s) => s.policy_id === policyId);
      const decided = evaluation.matched_policy === policyId;
      if (!decided && shadowed === undefined) return undefined;
      const decision = decided ? evaluation.decision : (shadowed as { decision: Decision }).decision;
      if (filter.decision !== undefined && decision !== filter.decision) return undefined;
      return {
        evaluation_id: evaluation.evaluation_id,
        evaluated_at: evaluation.evaluated_at,
        policy_id: policyId,
        rule_id: decided ? (evaluation.matched_rule ?? '') : (shadowed as { rule_id: string }).rule_id,
        action: evaluation.action,
        decision,
        shadow: !decided,
        envelope_id: evaluation.envelope_id,
        approval_id: decided ? evaluation.approval_id : null,
        actor: evaluation.actor,
      };
    };
    return namedPages('evaluations', request, (page) =>
      filteredPage(
        (p) => audit.list(tenant, { order: 'newest', action: 'policy.evaluate' }, p),
        select,
        (record) => [record.seq],
        page,
      ),
    );
  }

  /**
   * Evaluates and records: the audit record, a violation event on DENY, a pending approval on
   * REQUIRE_APPROVAL. Used by every surface's evaluate (REST, gRPC, MCP).
   *
   * Recording acts for an execution: it opens the approval an agent then waits on, announces a
   * denied action, and feeds the credential's history. That takes envelopes:write, the scope that
   * runs executions (envelope creation opens approvals too); evaluating takes only policies:read,
   * so without envelopes:write an evaluation is a dry run, and a read-only credential cannot open
   * approvals, notify reviewers or fill the audit log.
   */
  async decide(caller: Caller, question: PolicyQuestion): Promise<PolicyDecision> {
    const prepared = await this.prepare(caller, question);
    if (question.dryRun === true || !hasScope(caller.principal, 'envelopes:write'))
      return { result: prepared.result, approvalId: null };
    const approvalId = await this.deps.effects.commit((tx, effects) => prepared.record(tx, effects));
    prepared.recorded();
    return { result: prepared.result, approvalId };
  }

  async prepare(caller: Caller, question: PolicyQuestion): Promise<PreparedDecision> {
    if (question.policySet !== undefined && question.policySet.length > 0)
      await this.#requireKnown(caller.tenant, question.policySet);
    const ruleset = await this.ruleset(caller.tenant);
    const { execution_id: executionId, recent_actions: given } = question.context;
    const recent = readsHistory(ruleset, question.action) ? this.deps.history.recent(historyScope(caller)) : [];
    // The caller's own list can add earlier actions, never hide those the history saw.
    const context =
      recent.length === 0
        ? question.context
        : { ...question.context, recent_actions: [...(Array.isArray(given) ? (given as unknown[]) : []), ...recent] };
    const input = { action: question.action, context, policySet: question.policySet };
    const result = ruleset.needsJudge
      ? await evaluateAsync(ruleset, input, this.deps.judgeFor(caller.tenant))
      : evaluate(ruleset, input);
    this.deps.observe?.(result);
    const now = this.deps.clock();
    const record = async (tx: Repositories, effects: Effects): Promise<string | null> => {
      const approval =
        result.decision === 'REQUIRE_APPROVAL'
          ? await this.deps.approvals.open(tx, effects, caller, {
              action: question.action,
              context: question.context,
              envelopeId: question.envelopeId,
              result,
            })
          : null;
      await this.deps.audit.append(
        tx,
        caller.tenant,
        evaluationEntry({
          actor: actorOf(caller.principal),
          action: question.action,
          envelopeId: question.envelopeId ?? null,
          decision: result.decision,
          matchedPolicy: result.matched_policy,
          matchedRule: result.matched_rule,
          semantic: result.semantic,
          more: { shadow: result.shadow, approval_id: approval?.approval_id ?? null },
        }),
      );
      const sequence = sequenceOf(result);
      if (sequence !== undefined) {
        await tx.detections.insert(caller.tenant, {
          detection_id: timeOrderedUuid(),
          tenant_id: caller.tenant,
          kind: 'sequence',
          category: sequence.category,
          envelope_id: question.envelopeId ?? null,
          execution_id: typeof executionId === 'string' && executionId !== '' ? executionId : null,
          action: question.action,
          policy_id: sequence.policy_id,
          rule_id: sequence.rule_id,
          response: result.decision.toLowerCase(),
          details: {},
          source: 'control-plane',
          detected_at: now.toISOString(),
          recorded_at: now.toISOString(),
        });
        effects.detections.push('sequence');
      }
      if (!result.allowed) {
        const violation: PolicyViolationMessage = {
          tenant_id: caller.tenant,
          policy_id: result.matched_policy ?? '',
          rule_id: result.matched_rule,
          denied_action: question.action,
          decision: result.decision,
          envelope_id: question.envelopeId ?? null,
          message: result.message ?? result.reason,
          occurred_at: now.toISOString(),
          source: 'control-plane',
          ...(result.semantic === undefined ? {} : { semantic: result.semantic }),
        };
        effects.publications.push({
          subject: subjects.policyViolation(caller.tenant),
          data: violation,
          msgId: msgIds.violation(caller.tenant, timeOrderedUuid()),
        });
      }
      return approval?.approval_id ?? null;
    };
    const recorded = (): void => {
      // Only what was let through, and recorded, happened: a refused action is no step of a sequence.
      if (!result.allowed) return;
      const { tool_name: toolName, tool_args: toolArgs } = question.context;
      this.deps.history.record(
        historyScope(caller),
        {
          action: question.action,
          toolName: typeof toolName === 'string' ? toolName : '',
          toolArgs: typeof toolArgs === 'string' ? toolArgs : toolArgs === undefined ? '' : JSON.stringify(toolArgs),
        },
        sequencesToTrack(ruleset, this.deps.builtin),
      );
    };
    return { result, record, recorded };
  }
}

/**
 * Whether evaluating `action` can read the earlier actions: a rule's condition on
 * `recent_actions` (or below it), or a judge, which is given the whole context.
 */
function readsHistory(ruleset: CompiledRuleset, action: string): boolean {
  if (ruleset.needsJudge) return true;
  for (const field of ruleset.fieldsOf(action))
    if (field === RECENT_ACTIONS || field.startsWith(`${RECENT_ACTIONS}.`)) return true;
  return false;
}

const RECENT_ACTIONS = 'recent_actions';

/**
 * Whose actions make one history at the control plane: the authenticated credential, in its
 * tenant. An `execution_id` is the caller's to choose, so a history per execution would let a new
 * one leave a read behind; a credential is what a sidecar or an agent holds for all its executions
 * (as the proxy keeps one history per sidecar), and taking another needs a key with `admin`.
 */
function historyScope(caller: Caller): string {
  return `${caller.tenant}\u0000${caller.principal.type}\u0000${caller.principal.id}`;
}

function notFound(policyId: string): SvcError {
  return new SvcError('SVC-POL-2002', `policy ${policyId} not found`, { policy_id: policyId });
}
