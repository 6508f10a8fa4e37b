import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { fetch } from 'undici';
import type { WebhookCall } from './effects.ts';

export interface WebhookOptions {
  /** HMAC key; without one, deliveries are sent unsigned and say so in a header. */
  secret: string | undefined;
  maxAttempts: number;
  timeoutMs: number;
  /** Backoff before attempt n (1-based, n >= 2). */
  backoffMs?: (attempt: number) => number;
}

/** `sha256=<hex>` over `<timestamp>.<body>`, so a receiver can check origin and freshness. */
export function signWebhook(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

const defaultBackoff = (attempt: number) => Math.min(30_000, 500 * 2 ** (attempt - 2)) * (0.8 + Math.random() * 0.4);

/**
 * Budget alert webhooks: POST JSON, signed with HMAC-SHA256, retried with exponential backoff on
 * network errors, 5xx and 429; a 4xx other than 429 is final. Deliveries run in the background.
 */
export class WebhookSender {
  private readonly inFlight = new Set<Promise<void>>();

  private readonly options: WebhookOptions;
  private readonly log: Logger;

  constructor(options: WebhookOptions, log: Logger) {
    this.options = options;
    this.log = log;
  }

  send(call: WebhookCall): void {
    const delivery = this.deliver(call).finally(() => this.inFlight.delete(delivery));
    this.inFlight.add(delivery);
  }

  /** Waits for deliveries under way (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async deliver(call: WebhookCall): Promise<void> {
    const body = JSON.stringify(call.body);
    const backoff = this.options.backoffMs ?? defaultBackoff;
    for (let attempt = 1; attempt <= this.options.maxAttempts; attempt++) {
      if (attempt > 1) await new Promise((r) => setTimeout(r, backoff(attempt)));
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'svc-webhooks/1',
        'x-svc-delivery': call.deliveryId,
        'x-svc-attempt': String(attempt),
        'x-svc-timestamp': timestamp,
      };
      if (this.options.secret !== undefined)
        headers['x-svc-signature'] = signWebhook(this.options.secret, timestamp, body);
      try {
        const response = await fetch(call.url, {
          method: 'POST',
          headers,
          body,
          signal: AbortSignal.timeout(this.options.timeoutMs),
        });
        await response.body?.cancel();
        if (response.ok) return;
        if (response.status < 500 && response.status !== 429) {
          this.log.warn(
            { url: call.url, status: response.status, delivery: call.deliveryId },
            'webhook refused; not retried',
          );
          return;
        }
        this.log.warn(
          { url: call.url, status: response.status, attempt, delivery: call.deliveryId },
          'webhook failed; will retry',
        );
      } catch (error) {
        this.log.warn(
          { url: call.url, err: (error as Error).message, attempt, delivery: call.deliveryId },
          'webhook unreachable; will retry',
        );
      }
    }
    this.log.error({ url: call.url, delivery: call.deliveryId }, 'webhook gave up after the last attempt');
  }
}
