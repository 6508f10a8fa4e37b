import type { Logger } from 'pino';
import type { Outbox } from '../../core/outbox/outbox.ts';
import type { DetectionKind } from '../../core/brain/immune/detection.ts';
import type { ApprovalStanding, PauseSignal, TerminateSignal } from '../../core/sync/contract.ts';
import type { Repositories, Storage } from '../storage/storage.ts';
import { noEffects, type Effects, type ForeignClaim, type StateChange } from './effects.ts';
import type { WebhookSender } from './webhooks.ts';

/**
 * Pushes changed state to the proxies and signals terminations, pauses and resumptions, and approval decisions
 * (control-plane/sync). All only queue the work and return: the pushes happen in the background
 * and are repeated until NATS has taken them.
 */
export interface StateSync {
  push(changes: readonly StateChange[]): void;
  signal(signal: TerminateSignal): void;
  decided(standing: ApprovalStanding): void;
  paused(signal: PauseSignal): void;
}

/**
 * Commits changes with their bus publications and sets the rest of their effects going. A
 * publication is written to the outbox in the same storage transaction as the change it
 * announces, so it exists exactly when the change does; the outbox publishes it once NATS takes
 * it. Nothing here waits on NATS: a write answers as fast with NATS down as with it up.
 */
export class EffectDispatcher {
  private readonly storage: Storage;
  private readonly outbox: Outbox;
  private readonly webhooks: WebhookSender;
  private readonly log: Logger;
  private readonly detected: ((kind: DetectionKind) => void) | undefined;
  private readonly refused: ((claim: ForeignClaim['claim']) => void) | undefined;
  private sync: StateSync | null = null;

  constructor(deps: {
    storage: Storage;
    outbox: Outbox;
    webhooks: WebhookSender;
    log: Logger;
    /** Called for each detection a committed change stored, for metrics. */
    detected?: (kind: DetectionKind) => void;
    /** Called for each proxy message a committed change did not apply to the envelope it named, for metrics. */
    refused?: (claim: ForeignClaim['claim']) => void;
  }) {
    this.storage = deps.storage;
    this.outbox = deps.outbox;
    this.webhooks = deps.webhooks;
    this.log = deps.log;
    this.detected = deps.detected;
    this.refused = deps.refused;
  }

  /** Set once at start; before it, state changes are only stored (a full push follows at start). */
  attach(sync: StateSync): void {
    this.sync = sync;
  }

  /**
   * Runs `change` in one storage transaction with the publications it collects appended to the
   * outbox as its last step, then dispatches the other effects. Resolves with the change's result
   * once it committed; never waits on NATS. A transaction the storage runs again (PostgreSQL, on a
   * serialization failure) starts with no effects collected.
   */
  async commit<T>(change: (tx: Repositories, effects: Effects) => Promise<T>): Promise<T> {
    let effects = noEffects();
    const result = await this.storage.withTransaction(async (tx) => {
      effects = noEffects();
      const value = await change(tx, effects);
      await this.outbox.stage(
        effects.publications.map((p) => ({ id: p.msgId, subject: p.subject, data: p.data })),
        (events) => tx.outbox.append(events),
      );
      return value;
    });
    if (effects.publications.length > 0) this.outbox.notify();
    await this.dispatch(effects);
    return result;
  }

  /**
   * Sets going what committed effects ask besides publications (those went through `commit`):
   * state pushes and terminate signals first (they cut work at the proxies), then webhooks, all
   * in the background. Resolves at once.
   */
  dispatch(effects: Omit<Effects, 'publications'>): Promise<void> {
    if (this.sync !== null) {
      for (const signal of effects.signals) this.sync.signal(signal);
      for (const standing of effects.decisions) this.sync.decided(standing);
      for (const pause of effects.pauses) this.sync.paused(pause);
      if (effects.changes.length > 0) this.sync.push(effects.changes);
    } else if (effects.signals.length + effects.decisions.length + effects.pauses.length > 0) {
      // A proxy holding a call for a decision reads it on its next re-check.
      this.log.warn(
        { signals: effects.signals.length, decisions: effects.decisions.length, pauses: effects.pauses.length },
        'signals before state sync started; not sent',
      );
    }
    for (const call of effects.webhooks) this.webhooks.send(call);
    for (const kind of effects.detections) this.detected?.(kind);
    for (const foreign of effects.foreignClaims) {
      this.log.warn(
        {
          tenant_id: foreign.tenant,
          envelope_id: foreign.envelopeId,
          envelope_budget_id: foreign.envelopeBudget,
          claimed_budget_id: foreign.claimedBudget,
          claim: foreign.claim,
        },
        'a proxy named an envelope of another budget than it charges; not applied to the envelope',
      );
      this.refused?.(foreign.claim);
    }
    return Promise.resolve();
  }
}
