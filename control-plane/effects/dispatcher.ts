import type { Logger } from 'pino';
import type { Outbox } from '../../core/outbox/outbox.ts';
import type { TerminateSignal } from '../../core/sync/contract.ts';
import type { Store } from '../store/store.ts';
import { noEffects, type Effects, type StateChange } from './effects.ts';
import type { WebhookSender } from './webhooks.ts';

/**
 * Pushes changed state to the proxies and signals terminations (control-plane/sync). Both only
 * queue the work and return: the pushes happen in the background and are repeated until NATS
 * has taken them.
 */
export interface StateSync {
  push(changes: readonly StateChange[]): void;
  signal(signal: TerminateSignal): void;
}

/**
 * Commits changes with their bus publications and sets the rest of their effects going. A
 * publication is written to the outbox in the same store transaction as the change it
 * announces, so it exists exactly when the change does; the outbox publishes it once NATS takes
 * it. Nothing here waits on NATS: a write answers as fast with NATS down as with it up.
 */
export class EffectDispatcher {
  private readonly store: Store;
  private readonly outbox: Outbox;
  private readonly webhooks: WebhookSender;
  private readonly log: Logger;
  private sync: StateSync | null = null;

  constructor(deps: { store: Store; outbox: Outbox; webhooks: WebhookSender; log: Logger }) {
    this.store = deps.store;
    this.outbox = deps.outbox;
    this.webhooks = deps.webhooks;
    this.log = deps.log;
  }

  /** Set once at start; before it, state changes are only stored (a full push follows at start). */
  attach(sync: StateSync): void {
    this.sync = sync;
  }

  /**
   * Runs `change` in one store transaction (`batch`: the write-back kind of the event processor)
   * with the publications it collects appended to the outbox as its last step, then dispatches
   * the other effects. Resolves with the change's result once it committed; never waits on NATS.
   * Not to be called inside another transaction.
   */
  commit<T>(change: (effects: Effects) => T, options: { batch?: boolean } = {}): Promise<T> {
    const effects = noEffects();
    let committed: () => void = () => undefined;
    let result: T;
    try {
      const run = (): T => {
        const value = change(effects);
        committed = this.outbox.stage(
          effects.publications.map((p) => ({ id: p.msgId, subject: p.subject, data: p.data })),
        );
        return value;
      };
      result = options.batch === true ? this.store.batch(run) : this.store.transaction(run);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    committed();
    return this.dispatch(effects).then(() => result);
  }

  /**
   * Sets going what committed effects ask besides publications (those went through `commit`):
   * state pushes and terminate signals first (they cut work at the proxies), then webhooks, all
   * in the background. Resolves at once.
   */
  dispatch(effects: Omit<Effects, 'publications'>): Promise<void> {
    if (this.sync !== null) {
      for (const signal of effects.signals) this.sync.signal(signal);
      if (effects.changes.length > 0) this.sync.push(effects.changes);
    } else if (effects.signals.length > 0) {
      this.log.warn({ signals: effects.signals.length }, 'terminate signals before state sync started; not sent');
    }
    for (const call of effects.webhooks) this.webhooks.send(call);
    return Promise.resolve();
  }
}
