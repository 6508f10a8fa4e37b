import type { Logger } from 'pino';
import type { Bus } from '../../core/bus/bus.ts';
import type { Effects } from './effects.ts';
import type { WebhookSender } from './webhooks.ts';

/**
 * Carries out committed effects: bus publications in order, webhooks in the background.
 * A failed publication is logged with its message id and retried by the bus layer where durable;
 * it never fails the request whose change has already committed.
 */
export class EffectDispatcher {
  private readonly bus: Bus;
  private readonly webhooks: WebhookSender;
  private readonly log: Logger;

  constructor(bus: Bus, webhooks: WebhookSender, log: Logger) {
    this.bus = bus;
    this.webhooks = webhooks;
    this.log = log;
  }

  async dispatch(effects: Effects): Promise<void> {
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
