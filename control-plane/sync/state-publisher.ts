import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { KeyValueStore, Messaging } from '../../core/bus/bus.ts';
import { assertKey } from '../../core/bus/names.ts';
import { budgetStatus, isFinal, type Budget, type Envelope } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import {
  BUCKETS,
  keys,
  syncSubjects,
  type BudgetState,
  type ApprovalStanding,
  type HoldState,
  type RulesetSnapshot,
  type PauseSignal,
  type TerminateSignal,
} from '../../core/sync/contract.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { StateSync } from '../effects/dispatcher.ts';
import type { StateChange } from '../effects/effects.ts';
import type { LeaseLedger } from '../leases/lease-ledger.ts';
import type { Policies } from '../policies/policies.ts';
import type { EnvelopeReader } from '../storage/storage.ts';
import type { Tenants } from '../tenants/tenants.ts';

export function budgetState(
  budget: Budget,
  unleased: { tokens: number | null; micros: number | null },
  now: Date,
): BudgetState {
  return {
    tenant_id: budget.tenant_id,
    budget_id: budget.budget_id,
    workflow_id: budget.workflow_id,
    status: budgetStatus(budget, now),
    limits: budget.limits,
    period_start: budget.usage.period_start,
    period_end: budget.usage.period_end,
    used_tokens: budget.usage.tokens_input + budget.usage.tokens_output,
    used_micros: budget.usage.cost_micros,
    unleased_tokens: unleased.tokens,
    unleased_micros: unleased.micros,
    updated_at: now.toISOString(),
  };
}

/** Writes of one key lost to other replicas in a row before the sender backs off and retries. */
const MAX_PUBLISH_RACES = 10;

/** Longest pause between attempts while NATS does not take writes. */
const MAX_RETRY_MS = 5_000;

function keyOf(change: StateChange): string {
  switch (change.kind) {
    case 'ruleset':
      return keys.ruleset(change.tenant);
    case 'budget':
      return keys.budget(change.tenant, change.budgetId);
    case 'hold':
      return keys.hold(change.tenant, change.envelopeId);
  }
}

/** Whether the proxies must hold (PAUSED) or refuse (ended) the envelope's calls. */
function held(envelope: Envelope): boolean {
  return envelope.status === 'PAUSED' || isFinal(envelope.status);
}

/** Envelopes read per page when every paused one is sent again. */
const PAUSED_PAGE = 100;

/**
 * Keeps the key-value buckets the proxies watch current: each tenant's ruleset, each budget's
 * state, and the hold on each envelope paused, resumed or ended, written after every committed
 * change and in full at start (the holds: every paused envelope). Terminations, pauses and
 * approval decisions also go out as signals, which reach the proxies sooner.
 *
 * Nothing waits on NATS: `push` and `signal` queue the work and one background sender carries it
 * out, signals first. A key is queued once however often it changes (the value is read from
 * storage when it is sent, so the latest state goes out), and stays queued until NATS took it.
 * After a failure every key is sent again once NATS takes writes, in case it lost what it held.
 *
 * Every replica publishes the changes it commits, from the one shared store: a write is a compare
 * and set on the key's revision, so two replicas sending the same key never leave the older state
 * in the bucket, and a ruleset version already there is not sent again.
 */
export class StatePublisher implements StateSync {
  private readonly deps: {
    messaging: Messaging;
    policies: Policies;
    budgets: Budgets;
    leases: LeaseLedger;
    tenants: Tenants;
    envelopes: Pick<EnvelopeReader, 'get' | 'list'>;
    /** `hold_max_age_seconds`: the age limit of `svc_holds`. */
    holdMaxAgeMs: number;
    clock: () => Date;
    logger: Logger;
  };
  private rulesets: KeyValueStore | null = null;
  private budgetBucket: KeyValueStore | null = null;
  private holdBucket: KeyValueStore | null = null;
  /** Keys to send, with a mark that changes when the key is queued again while it is being sent. */
  private readonly pending = new Map<string, { change: StateChange; mark: number }>();
  /** Signals to send: one terminate and one pause state per envelope, one decision per approval. */
  private readonly signals = new Map<
    string,
    { subject: string; data: TerminateSignal | PauseSignal | ApprovalStanding }
  >();
  private marks = 0;
  /** Failed attempts in a row to bring the buckets up to date; 0 once one succeeds. */
  private failures = 0;
  private resync = false;
  private sending: Promise<void> | null = null;
  private stopped = false;
  private readonly abort = new AbortController();

  constructor(deps: StatePublisher['deps']) {
    this.deps = deps;
  }

  /** Opens the buckets and sends the whole state; resolves once NATS took it. */
  async start(): Promise<void> {
    this.rulesets = await this.deps.messaging.keyValue.open(BUCKETS.rulesets);
    this.budgetBucket = await this.deps.messaging.keyValue.open(BUCKETS.budgets);
    this.holdBucket = await this.deps.messaging.keyValue.open(BUCKETS.holds, { maxAgeMs: this.deps.holdMaxAgeMs });
    await this.refresh();
  }

  /**
   * Sends every ruleset and budget state again; resolves once NATS took them, or once `signal`
   * aborts (what is queued then stays with the sender).
   */
  async refresh(signal?: AbortSignal): Promise<void> {
    this.push(await this.everything());
    if (signal === undefined) return this.idle();
    if (signal.aborted) return;
    await Promise.race([this.idle(), once(signal, 'abort')]);
  }

  /** Stops sending; what is still queued is sent again in full at the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.sending;
  }

  push(changes: readonly StateChange[]): void {
    for (const change of changes) this.pending.set(keyOf(change), { change, mark: ++this.marks });
    this.kick();
  }

  signal(signal: TerminateSignal): void {
    this.signals.set(`terminate/${signal.tenant_id}/${signal.envelope_id}`, {
      subject: syncSubjects.terminate(signal.tenant_id),
      data: signal,
    });
    this.kick();
  }

  /** The latest of an envelope's pauses and resumptions wins: only its current state is sent. */
  paused(signal: PauseSignal): void {
    this.signals.set(`pause/${signal.tenant_id}/${signal.envelope_id}`, {
      subject: syncSubjects.pause(signal.tenant_id),
      data: signal,
    });
    this.kick();
  }

  decided(standing: ApprovalStanding): void {
    this.signals.set(`approval/${standing.tenant_id}/${standing.approval_id}`, {
      subject: syncSubjects.approvalDecided(standing.tenant_id),
      data: standing,
    });
    this.kick();
  }

  /**
   * The state of the copies proxies enforce from (the `cache` of GET /health, spec 4.5): down
   * while sending to the buckets fails, with what waits to be sent.
   */
  health(): { status: 'ok' | 'down'; detail?: string } {
    if (this.failures === 0) return { status: 'ok' };
    return {
      status: 'down',
      detail: `${this.failures} failed attempts to update the proxies' buckets; ${this.pending.size} keys waiting`,
    };
  }

  /** Resolves once everything queued has been sent. */
  async idle(): Promise<void> {
    while (this.sending !== null) await this.sending;
  }

  private async everything(): Promise<StateChange[]> {
    const changes: StateChange[] = [];
    for (const tenant of ['system', ...(await this.deps.tenants.list()).map((t) => t.tenant_id)]) {
      changes.push({ kind: 'ruleset', tenant });
      for (const budget of await this.deps.budgets.list(tenant, 'all'))
        changes.push({ kind: 'budget', tenant, budgetId: budget.budget_id });
      // A pause lasts until someone resumes it: its hold is kept from ageing out of the bucket.
      let pageToken: string | null = null;
      do {
        const page = await this.deps.envelopes.list(tenant, { status: 'PAUSED' }, { pageSize: PAUSED_PAGE, pageToken });
        for (const envelope of page.items) changes.push({ kind: 'hold', tenant, envelopeId: envelope.envelope_id });
        pageToken = page.nextPageToken;
      } while (pageToken !== null);
    }
    return changes;
  }

  private kick(): void {
    if (this.sending !== null || this.stopped) return;
    this.sending = this.send().finally(() => {
      this.sending = null;
      if (this.pending.size > 0 || this.signals.size > 0) this.kick();
    });
  }

  private async send(): Promise<void> {
    while (!this.stopped && (this.pending.size > 0 || this.signals.size > 0)) {
      try {
        for (const [key, { subject, data }] of this.signals) {
          await this.deps.messaging.signals.publishSignal(subject, data);
          this.signals.delete(key);
        }
        if (this.resync) {
          this.resync = false;
          this.push(await this.everything());
        }
        for (const [key, { change, mark }] of this.pending) {
          if (change.kind === 'ruleset') await this.pushRuleset(change.tenant);
          else if (change.kind === 'budget') await this.pushBudget(change.tenant, change.budgetId);
          else await this.pushHold(change.tenant, change.envelopeId);
          // Queued again while it was sent: storage may have changed since it was read.
          if (this.pending.get(key)?.mark === mark) this.pending.delete(key);
        }
        this.failures = 0;
      } catch (error) {
        const failures = ++this.failures;
        this.resync = true;
        this.deps.logger.warn(
          { err: error, queued: this.pending.size, signals: this.signals.size, failures },
          'state push to NATS failed; retrying in the background',
        );
        await sleep(Math.min(MAX_RETRY_MS, 250 * 2 ** (failures - 1)), undefined, {
          signal: this.abort.signal,
        }).catch(() => undefined);
      }
    }
  }

  private async pushRuleset(tenant: string): Promise<void> {
    const bucket = this.rulesets;
    if (bucket === null) return;
    await this.publish(bucket, keys.ruleset(tenant), async (current) => {
      const { version, policies } = await this.deps.policies.snapshot(tenant);
      // Another replica sent this version (or a later one) already: proxies need not see it twice.
      const sent = (current as { version?: unknown } | undefined)?.version;
      if (typeof sent === 'number' && sent >= version) return undefined;
      const snapshot: RulesetSnapshot = {
        tenant_id: tenant,
        version,
        policies,
        published_at: this.deps.clock().toISOString(),
      };
      return snapshot;
    });
  }

  private async pushBudget(tenant: string, budgetId: string): Promise<void> {
    const bucket = this.budgetBucket;
    if (bucket === null) return;
    const key = keys.budget(tenant, budgetId);
    let deleted = false;
    const created = await this.publish(bucket, key, async () => {
      const budget = await this.deps.budgets.find(tenant, budgetId);
      deleted = budget === undefined;
      if (budget === undefined) return undefined;
      return budgetState(budget, await this.deps.leases.unleased(tenant, budget), this.deps.clock());
    });
    // A create also takes a key whose last entry is a deletion, so a replica that deleted the
    // budget after it was read here may have removed the key before this write recreated it:
    // storage, read after the write, tells.
    if (created) deleted = (await this.deps.budgets.find(tenant, budgetId)) === undefined;
    // A deleted budget's state leaves the bucket: a proxy's next lease request for it is refused.
    if (deleted) await bucket.delete(key);
  }

  /**
   * The envelope's hold as storage has it: PAUSED or ended, or RUNNING again over a hold that is
   * still in the bucket. The same hold is not written again until half the bucket's age limit
   * has passed (then it is, so a pause in force never ages out).
   */
  private async pushHold(tenant: string, envelopeId: string): Promise<void> {
    const bucket = this.holdBucket;
    if (bucket === null) return;
    const key = keys.hold(tenant, envelopeId);
    try {
      assertKey(key);
    } catch {
      // Proxies only serve envelopes whose ids are UUIDs; no proxy could meet this one.
      this.deps.logger.warn({ tenant, envelope_id: envelopeId }, 'envelope id cannot be a hold key; not sent');
      return;
    }
    await this.publish(bucket, key, async (current) => {
      const envelope = await this.deps.envelopes.get(tenant, envelopeId);
      if (envelope === undefined) return undefined;
      const sent = current as Partial<HoldState> | undefined;
      // Nothing to lift: the proxies never learnt of a hold on it.
      if (!held(envelope) && (sent === undefined || sent.status === 'RUNNING')) return undefined;
      const now = this.deps.clock();
      const fresh =
        sent?.status === envelope.status &&
        sent.reason === envelope.status_reason &&
        now.getTime() - Date.parse(sent.written_at ?? '') < this.deps.holdMaxAgeMs / 2;
      if (fresh) return undefined;
      const state: HoldState = {
        tenant_id: tenant,
        envelope_id: envelopeId,
        execution_id: envelope.execution_id,
        budget_id: envelope.budget_id,
        status: held(envelope) ? envelope.status : 'RUNNING',
        reason: envelope.status_reason,
        written_at: now.toISOString(),
      };
      return state;
    });
  }

  /**
   * Writes what `read` makes of storage, unless another replica wrote the key after it was read
   * here: the key's revision is read before storage and the write is conditional on it, so a value
   * read earlier than the one in the bucket never replaces it (storage is shared; what a later
   * read sees is at least as new). On a lost race both are read again. `read` returns undefined
   * when there is nothing to send. Whether the write created the key.
   */
  private async publish(
    bucket: KeyValueStore,
    key: string,
    read: (current: unknown) => Promise<unknown>,
  ): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const current = await bucket.get(key);
      const value = await read(current?.value);
      if (value === undefined) return false;
      if ((await bucket.putIf(key, value, current?.revision ?? null)) !== null) return current === undefined;
      if (attempt === MAX_PUBLISH_RACES)
        throw new SvcError('SVC-SYS-9001', `${key}: other writers kept changing it`, { key });
    }
  }
}
