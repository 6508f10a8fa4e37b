import type { Database, RootDatabase } from 'lmdb';
import type { KeyValueStores, Subscription } from '../../core/bus/bus.ts';
import { isFinal, type EnvelopeStatus } from '../../core/domain/envelope.ts';
import { BUCKETS, HoldStateSchema, keys, type HoldState } from '../../core/sync/contract.ts';
import { writeInBackground } from '../store/index.ts';
import { watchTenantValues } from './tenant-values.ts';

export interface HoldLogger {
  warn(object: Record<string, unknown>, message: string): void;
}

const DB_NAME = 'hold-states';

/** A hold from a control plane that names no budget (an older one): it applies whatever the budget. */
const ANY_BUDGET = Symbol('any budget');
type BudgetKey = string | typeof ANY_BUDGET;

/**
 * Under which budget a hold is found by its execution: its envelope's; none for an envelope
 * without a budget, which no proxy charges and so none of whose calls a proxy serves by execution.
 */
function budgetKey(hold: HoldState): BudgetKey | null {
  return hold.budget_id === undefined ? ANY_BUDGET : hold.budget_id;
}

/**
 * The tenant's envelopes the control plane holds (paused) or ended, as the `svc_holds` bucket has
 * them, so that an envelope this proxy meets anew (after a restart, an eviction from its envelope
 * cache, a NATS outage when the signal went out) is held or refused and never served ungoverned.
 *
 * Bounded: beyond `maxEntries` the oldest ended envelopes are forgotten first (an ended envelope
 * is rarely called again), paused ones only when nothing else is left. Kept in the proxy's LMDB
 * store too, so a proxy that restarts while NATS is away still knows them.
 */
export class HoldStates {
  readonly #tenantId: string;
  readonly #now: () => number;
  readonly #maxEntries: number;
  readonly #db: Database<HoldState, string>;
  readonly #logger: HoldLogger;
  /** In the order learnt, oldest first, split so that eviction finds an ended one at once. */
  readonly #ended = new Map<string, HoldState>();
  readonly #paused = new Map<string, HoldState>();
  /**
   * Execution, then budget, to envelope id: an execution id is the agent's choice, and agents
   * of other teams (other budgets) may well choose the same one.
   */
  readonly #byExecution = new Map<string, Map<BudgetKey, string>>();

  /**
   * `maxAgeMs` (`hold_max_age_seconds`): a hold kept on disk that is older than the bucket keeps
   * holds is not loaded, as the bucket would not have it either (a pause in force is written
   * again before then, and the watch brings it back).
   */
  constructor(options: {
    tenantId: string;
    maxEntries: number;
    maxAgeMs: number;
    store: RootDatabase;
    /** Hears a write to the store that failed. */
    logger: HoldLogger;
    now?: () => number;
  }) {
    this.#tenantId = options.tenantId;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#maxEntries = options.maxEntries;
    this.#db = options.store.openDB<HoldState, string>({ name: DB_NAME, encoding: 'json' });
    const oldest = this.#now() - options.maxAgeMs;
    for (const { key, value } of this.#db.getRange()) {
      const parsed = HoldStateSchema.safeParse(value);
      if (parsed.success && Date.parse(parsed.data.written_at) > oldest) this.#remember(parsed.data);
      else this.#remove(key);
    }
  }

  get size(): number {
    return this.#ended.size + this.#paused.size;
  }

  forEnvelope(envelopeId: string): HoldState | undefined {
    return this.#ended.get(envelopeId) ?? this.#paused.get(envelopeId);
  }

  /**
   * The held envelope an execution id belongs to (a proxy opens one envelope per execution) on
   * the first of `budgets` that has one, else on a budget its hold does not name.
   */
  forExecution(executionId: string, budgets: Iterable<string>): HoldState | undefined {
    const byBudget = this.#byExecution.get(executionId);
    if (byBudget === undefined) return undefined;
    for (const budget of budgets) {
      const envelopeId = byBudget.get(budget);
      if (envelopeId !== undefined) return this.forEnvelope(envelopeId);
    }
    const envelopeId = byBudget.get(ANY_BUDGET);
    return envelopeId === undefined ? undefined : this.forEnvelope(envelopeId);
  }

  /** Records the hold (RUNNING lifts it). */
  apply(hold: HoldState): void {
    this.#forget(hold.envelope_id);
    if (hold.status === 'RUNNING') return this.#remove(hold.envelope_id);
    this.#remember(hold);
    // The copy in memory is in force whatever becomes of the one on disk, which serves a start
    // without NATS only.
    writeInBackground(
      this.#db.put(hold.envelope_id, hold),
      this.#logger,
      { envelope_id: hold.envelope_id, status: hold.status },
      'envelope hold not kept on disk: a restart without NATS would not know it',
    );
  }

  /**
   * Keeps an envelope this proxy saw end (a terminate signal, or its own cut) as the bucket would
   * have it: the bucket's copy comes later, from the control plane, and a restart with NATS away
   * before it came would have served the envelope again.
   */
  ended(
    envelope: { envelopeId: string; executionId: string; budgetId: string },
    ending: { status: EnvelopeStatus; reason: string },
  ): void {
    const known = this.forEnvelope(envelope.envelopeId);
    if (known !== undefined && isFinal(known.status)) return;
    this.apply({
      tenant_id: this.#tenantId,
      envelope_id: envelope.envelopeId,
      execution_id: envelope.executionId,
      budget_id: envelope.budgetId,
      status: ending.status,
      reason: ending.reason,
      written_at: new Date(this.#now()).toISOString(),
    });
  }

  #remove(envelopeId: string): void {
    writeInBackground(
      this.#db.remove(envelopeId),
      this.#logger,
      { envelope_id: envelopeId },
      'envelope hold not removed from disk',
    );
  }

  #remember(hold: HoldState): void {
    this.#forget(hold.envelope_id);
    if (hold.status === 'RUNNING') return;
    (isFinal(hold.status) ? this.#ended : this.#paused).set(hold.envelope_id, hold);
    const budget = budgetKey(hold);
    if (budget !== null) {
      const byBudget = this.#byExecution.get(hold.execution_id) ?? new Map<BudgetKey, string>();
      byBudget.set(budget, hold.envelope_id);
      this.#byExecution.set(hold.execution_id, byBudget);
    }
    while (this.size > this.#maxEntries) {
      const [oldest] = this.#ended.size > 0 ? this.#ended.keys() : this.#paused.keys();
      if (oldest === undefined) break;
      this.#forget(oldest);
      this.#remove(oldest);
    }
  }

  #forget(envelopeId: string): void {
    const hold = this.forEnvelope(envelopeId);
    if (hold === undefined) return;
    this.#ended.delete(envelopeId);
    this.#paused.delete(envelopeId);
    const budget = budgetKey(hold);
    const byBudget = this.#byExecution.get(hold.execution_id);
    if (budget === null || byBudget?.get(budget) !== envelopeId) return;
    byBudget.delete(budget);
    if (byBudget.size === 0) this.#byExecution.delete(hold.execution_id);
  }
}

/**
 * Watches the tenant's holds; resolves once the values present at start are applied. `onHold`
 * hears each change after it is recorded, to apply it to the envelopes this proxy serves.
 */
export function watchHoldStates(
  keyValue: KeyValueStores,
  tenantId: string,
  holds: HoldStates,
  onHold: (hold: HoldState) => void,
  logger: HoldLogger,
): Promise<Subscription> {
  const watched = {
    bucket: BUCKETS.holds,
    filter: keys.holdFilter,
    schema: HoldStateSchema,
    what: 'envelope hold',
    keyOf: (tenant: string, hold: HoldState) => keys.hold(tenant, hold.envelope_id),
  };
  return watchTenantValues(
    keyValue,
    watched,
    tenantId,
    (hold) => {
      holds.apply(hold);
      onHold(hold);
    },
    logger,
  );
}
