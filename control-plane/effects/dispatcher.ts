import type { Logger } from 'pino';
import type { Bus } from '../../core/bus/bus.ts';
import type { Effects, StateChange } from './effects.ts';
import type { WebhookSender } from './webhooks.ts';
import type { TerminateSignal } from '../../core/sync/contract.ts';

/** Pushes changed state to the proxies and signals terminations (control-plane/sync). */
export interface StateSync {
  push(changes: readonly StateChange[]): Promise<void>;
  signal(signal: TerminateSignal): Promise<void>;
}

/**
 * Carries out committed effects: state pushes and terminate signals first (they cut work at the
 * proxies), then bus publications in order, then webhooks in the background. A failure here is
 * logged; it never fails the request whose change has already committed.
 */
export class EffectDispatcher {
  private readonly bus: Bus;
  private readonly webhooks: WebhookSender;
  private readonly log: Logger;
  private sync: StateSync | null = null;

  constructor(bus: Bus, webhooks: WebhookSender, log: Logger) {
    this.bus = bus;
    this.webhooks = webhooks;
    this.log = log;
  }

  /** Set once at start; before it, state changes are only stored (a full push follows at start). */
  attach(sync: StateSync): void {
    this.sync = sync;
  }

  async dispatch(effects: Effects): Promise<void> {
    if (this.sync !== null) {
      for (const signal of effects.signals) {
        await this.sync
          .signal(signal)
          .catch((error: unknown) =>
            this.log.error({ err: error, envelope_id: signal.envelope_id }, 'terminate signal failed'),
          );
      }
      if (effects.changes.length > 0) {
        await this.sync
          .push(effects.changes)
          .catch((error: unknown) => this.log.error({ err: error }, 'state push failed'));
      }
    }
    for (const p of effects.publications) {
      try {
        await this.bus.publish(p.subject, p.data, { msgId: p.msgId });
      } catch (error) {
        this.log.error({ err: error, subject: p.subject, msg_id: p.msgId }, 'event publication failed');
      }
    }
    for (const call of effects.webhooks) this.webhooks.send(call);
  }
}
