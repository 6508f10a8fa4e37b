import type { IncomingHttpHeaders } from 'node:http';
import { timeOrderedUuid } from '../../core/domain/index.ts';
import { isFinal, type EnvelopeStatus } from '../../core/domain/envelope.ts';
import type { HoldState } from '../../core/sync/contract.ts';
import type { z } from 'zod';
import { IdSchema, MAX_ID_LENGTH } from '../../core/domain/bounds.ts';
import { UuidSchema } from '../../core/domain/common.ts';
import { SvcError } from '../../core/errors/index.ts';
import { SidecarState } from '../holds/sidecar-state.ts';

export const ENVELOPE_HEADER = 'x-svc-envelope-id';
export const EXECUTION_HEADER = 'x-svc-execution-id';
export const BUDGET_HEADER = 'x-svc-budget-id';

/** Ends one in-flight call of an envelope (a stream is cut with an error event). */
export type Cutter = (ending: Ending) => void;

export interface Ending {
  status: EnvelopeStatus;
  reason: string;
}

/** What this proxy knows of one envelope it serves calls for. */
export interface LocalEnvelope {
  readonly envelopeId: string;
  readonly executionId: string;
  readonly budgetId: string;
  /** Set once the envelope ended here or was terminated elsewhere; further calls are refused. */
  ending: Ending | null;
  /** Why the envelope is paused here (the Immune System paused it); its calls are held meanwhile. */
  paused: string | null;
  readonly inflight: Set<Cutter>;
}

/**
 * `envelope`, unless the request names another budget than the one it is charged to: an
 * execution's budget is chosen when it opens, and a call charged elsewhere than its header says
 * would surprise whoever reads that budget.
 */
function onBudget(envelope: LocalEnvelope, named: string | undefined): LocalEnvelope {
  if (named === undefined || named === envelope.budgetId) return envelope;
  throw new SvcError(
    'SVC-SYS-9002',
    `invalid request: X-Svc-Budget-Id: names budget ${named}, and execution ${envelope.executionId} is charged to budget ${envelope.budgetId}; an execution keeps the budget it opened with`,
    { header: 'X-Svc-Budget-Id', fields: 'X-Svc-Budget-Id', budget_id: named },
    [{ field: 'X-Svc-Budget-Id', description: `execution is charged to budget ${envelope.budgetId}` }],
  );
}

export interface Resolution {
  envelope: LocalEnvelope;
  /** True when this request opened the envelope (publish EnvelopeOpened). */
  opened: boolean;
}

export interface EnvelopeRegistryOptions {
  defaultBudgetId: string;
  /** Further budgets a request may name in X-Svc-Budget-Id; the default budget always may. */
  allowedBudgetIds?: Iterable<string>;
  /** The execution every request without envelope or execution header belongs to. */
  podExecutionId: string;
  /** Envelopes remembered; the oldest idle ones are forgotten beyond it. */
  maxEntries?: number;
  /**
   * What the control plane holds (paused or ended): consulted for every envelope this registry
   * meets anew, so one it never knew or forgot is not served ungoverned.
   */
  holds?: HeldEnvelopes;
  /** Whether the whole sidecar is terminated (shared with the pause holds, kept across restarts). */
  sidecar?: SidecarState;
}

export interface HeldEnvelopes {
  forEnvelope(envelopeId: string): HoldState | undefined;
  /** The execution's held envelope on the first of `budgets` that has one (or on a budget its hold does not name). */
  forExecution(executionId: string, budgets: Iterable<string>): HoldState | undefined;
  /** Told of each envelope ended here, to be refused after a restart too. */
  ended(envelope: Pick<LocalEnvelope, 'envelopeId' | 'executionId' | 'budgetId'>, ending: Ending): void;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  const trimmed = first?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}

/**
 * An id the agent names becomes a key of the control plane's store and a field of every event:
 * one that could not be stored is refused here, before anything is sent (an event the control
 * plane had to set aside would leave the call's spend unrecorded).
 */
function checked(value: string | undefined, name: string, schema: z.ZodType<string>): string | undefined {
  if (value === undefined || schema.safeParse(value).success) return value;
  const description = schema === UuidSchema ? 'must be a UUID' : `must be 1 to ${MAX_ID_LENGTH} characters`;
  throw new SvcError('SVC-SYS-9002', `invalid request: ${name}: ${description}`, { header: name }, [
    { field: name, description },
  ]);
}

/**
 * Chooses the envelope of each request: `X-Svc-Envelope-Id` names one directly (made through
 * the REST API), `X-Svc-Execution-Id` opens one on first sight and reuses it after, and anything
 * else belongs to the pod's own execution. `X-Svc-Budget-Id` picks the budget of a new one,
 * among the budgets this sidecar is bound to only: the agent cannot charge someone else's.
 */
export class EnvelopeRegistry {
  readonly #byEnvelope = new Map<string, LocalEnvelope>();
  readonly #byExecution = new Map<string, LocalEnvelope>();
  readonly #options: Required<Omit<EnvelopeRegistryOptions, 'allowedBudgetIds' | 'holds' | 'sidecar'>>;
  readonly #allowedBudgets: ReadonlySet<string>;
  readonly #holds: HeldEnvelopes | undefined;
  readonly #sidecar: SidecarState;
  #onEnded: (envelopeId: string) => void = () => undefined;

  constructor(options: EnvelopeRegistryOptions) {
    const { allowedBudgetIds = [], holds, sidecar = new SidecarState(), ...rest } = options;
    this.#holds = holds;
    this.#sidecar = sidecar;
    this.#options = { maxEntries: 10_000, ...rest };
    this.#allowedBudgets = new Set([options.defaultBudgetId, ...allowedBudgetIds]);
  }

  /**
   * Throws SvcError SVC-SYS-9004 when X-Svc-Budget-Id names a budget this sidecar may not charge,
   * SVC-SYS-9002 when an envelope or execution id could not be recorded, SVC-ENV-1003 for an
   * envelope met anew once the sidecar ended (`endAll`).
   */
  resolve(headers: IncomingHttpHeaders): Resolution {
    const named = header(headers, BUDGET_HEADER);
    // Checked whatever else the request names, so a refused budget id never depends on state.
    if (named !== undefined && !this.#allowedBudgets.has(named)) {
      throw new SvcError(
        'SVC-SYS-9004',
        `budget ${named} is not one this sidecar may charge (X-Svc-Budget-Id must be SVC_BUDGET_ID or listed in SVC_ALLOWED_BUDGET_IDS)`,
        { budget_id: named, header: 'X-Svc-Budget-Id' },
      );
    }
    const envelopeId = checked(header(headers, ENVELOPE_HEADER), 'X-Svc-Envelope-Id', UuidSchema);
    const executionId = checked(header(headers, EXECUTION_HEADER), 'X-Svc-Execution-Id', IdSchema);
    const budgetId = named ?? this.#options.defaultBudgetId;
    if (envelopeId !== undefined) {
      const known = this.#byEnvelope.get(envelopeId);
      if (known !== undefined) return { envelope: onBudget(known, named), opened: false };
      // Made elsewhere (REST): the control plane already has it, so nothing is announced.
      const held = this.#holds?.forEnvelope(envelopeId);
      const envelope = this.#meet(envelopeId, executionId ?? envelopeId, this.#heldBudget(held) ?? budgetId);
      return { envelope: onBudget(envelope, named), opened: false };
    }
    if (executionId === undefined && named !== undefined && named !== this.#options.defaultBudgetId) {
      throw new SvcError(
        'SVC-SYS-9002',
        `invalid request: X-Svc-Budget-Id: names budget ${named} without X-Svc-Execution-Id; the pod's own execution is charged to SVC_BUDGET_ID (${this.#options.defaultBudgetId}), so name an execution to charge another budget`,
        { header: 'X-Svc-Budget-Id', fields: 'X-Svc-Budget-Id' },
        [{ field: 'X-Svc-Budget-Id', description: 'needs X-Svc-Execution-Id' }],
      );
    }
    const execution = executionId ?? this.#options.podExecutionId;
    const known = this.#byExecution.get(execution);
    if (known !== undefined) return { envelope: onBudget(known, named), opened: false };
    // The execution's envelope is held (this proxy restarted or forgot it): its calls stay with it.
    // Only one on a budget this sidecar charges is this execution's: another team's agent may have
    // chosen the same execution id.
    const held = this.#holds?.forExecution(execution, this.#allowedBudgets);
    if (held !== undefined) {
      const envelope =
        this.#byEnvelope.get(held.envelope_id) ??
        this.#meet(held.envelope_id, execution, this.#heldBudget(held) ?? budgetId);
      return { envelope: onBudget(envelope, named), opened: false };
    }
    return { envelope: this.#meet(timeOrderedUuid(), execution, budgetId), opened: true };
  }

  get(envelopeId: string): LocalEnvelope | undefined {
    return this.#byEnvelope.get(envelopeId);
  }

  /** `listener` hears the id of every envelope that ends here (the sidecar's pause may ride on it). */
  whenEnded(listener: (envelopeId: string) => void): void {
    this.#onEnded = listener;
  }

  /** Marks the envelope ended and cuts its in-flight calls; false when it was unknown or already ended. */
  end(envelopeId: string, ending: Ending): boolean {
    const envelope = this.#byEnvelope.get(envelopeId);
    if (envelope === undefined || envelope.ending !== null) return false;
    envelope.ending = ending;
    this.#holds?.ended(envelope, ending);
    for (const cut of [...envelope.inflight]) cut(ending);
    this.#onEnded(envelopeId);
    return true;
  }

  /**
   * Ends every envelope of the sidecar, cutting their in-flight calls, and refuses every envelope
   * met from now on, after a restart too: the agent names its executions itself, so ending one
   * would leave it the next. The envelopes it ended now.
   */
  endAll(ending: Ending): LocalEnvelope[] {
    this.#sidecar.set({ state: 'terminated', reason: ending.reason });
    return [...this.#byEnvelope.values()].filter((envelope) => this.end(envelope.envelopeId, ending));
  }

  /**
   * Records an envelope terminated elsewhere even if this proxy has not served it yet. Its
   * execution's later calls here are refused too only when they are its: on a budget this sidecar
   * charges, and of an execution this proxy serves no envelope of. An execution id is the agent's
   * choice, and another team's agent may well use the same one.
   */
  endRemote(envelopeId: string, executionId: string | null, budgetId: string | null, ending: Ending): void {
    if (!this.#byEnvelope.has(envelopeId)) {
      const execution = executionId ?? envelopeId;
      const its = budgetId !== null && this.#allowedBudgets.has(budgetId) && !this.#byExecution.has(execution);
      this.#add(envelopeId, its ? execution : envelopeId, budgetId ?? this.#options.defaultBudgetId);
    }
    this.end(envelopeId, ending);
  }

  /**
   * The budget a held envelope is on, when this sidecar may charge it: met anew (after a restart,
   * or named by id), it keeps that budget as it did before, and the control plane counts its calls
   * toward it only when they charge it. A budget the sidecar may not charge is not this sidecar's
   * envelope: the request's own budget pays, and the control plane leaves the envelope as it is.
   */
  #heldBudget(held: HoldState | undefined): string | undefined {
    const budget = held?.budget_id;
    return budget !== undefined && budget !== null && this.#allowedBudgets.has(budget) ? budget : undefined;
  }

  /** A request's envelope met anew; none once the sidecar ended, as a new execution id would escape it. */
  #meet(envelopeId: string, executionId: string, budgetId: string): LocalEnvelope {
    const held = this.#sidecar.current;
    if (held?.state === 'terminated') {
      throw new SvcError(
        'SVC-ENV-1003',
        `this sidecar was terminated (${held.reason}); no envelope runs through it again until the sidecar is replaced (a new data directory)`,
        { execution_id: executionId, reason: held.reason },
      );
    }
    return this.#add(envelopeId, executionId, budgetId);
  }

  #add(envelopeId: string, executionId: string, budgetId: string): LocalEnvelope {
    const envelope: LocalEnvelope = {
      envelopeId,
      executionId,
      budgetId,
      ending: null,
      paused: null,
      inflight: new Set(),
    };
    const hold = this.#holds?.forEnvelope(envelopeId);
    if (hold !== undefined && isFinal(hold.status))
      envelope.ending = { status: hold.status, reason: hold.reason ?? hold.status.toLowerCase() };
    else if (hold?.status === 'PAUSED') envelope.paused = hold.reason ?? 'paused';
    this.#byEnvelope.set(envelopeId, envelope);
    this.#byExecution.set(executionId, envelope);
    this.#evict();
    return envelope;
  }

  #evict(): void {
    if (this.#byEnvelope.size <= this.#options.maxEntries) return;
    for (const [id, envelope] of this.#byEnvelope) {
      if (this.#byEnvelope.size <= this.#options.maxEntries) break;
      // A paused one stays: forgetting it would let its next call through before it is resumed.
      if (
        envelope.inflight.size > 0 ||
        envelope.paused !== null ||
        envelope.executionId === this.#options.podExecutionId
      )
        continue;
      this.#byEnvelope.delete(id);
      if (this.#byExecution.get(envelope.executionId) === envelope) this.#byExecution.delete(envelope.executionId);
    }
  }
}
