import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { Agent } from 'undici';
import { loggableUrl } from '../../core/observability/redact.ts';
import type { WebhookCall } from './effects.ts';
import { WebhookTargetRefused, type WebhookTargets } from './webhook-targets.ts';

export interface WebhookOptions {
  /** The tenant's signing keys, newest first (two during a rotation's grace period). */
  secrets: (tenant: string) => Promise<string[]>;
  /** Where deliveries may connect. */
  targets: WebhookTargets;
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

type Outcome = 'delivered' | 'retry' | 'final';

/**
 * Budget alert webhooks: POST JSON, signed with the tenant's HMAC key, retried with exponential
 * backoff on network errors, 5xx and 429; any other answer (a 4xx, a redirect, which is never
 * followed) is final, and so is a target the webhook policy refuses. Deliveries run in the
 * background. Logs name the URL by origin and path only: its credentials and query stay out.
 */
export class WebhookSender {
  private readonly inFlight = new Set<Promise<void>>();
  private readonly options: WebhookOptions;
  private readonly log: Logger;
  private readonly agent: Agent;

  constructor(options: WebhookOptions, log: Logger) {
    this.options = options;
    this.log = log;
    // Every connection resolves through the policy's lookup and goes to the address it checked.
    this.agent = new Agent({ connect: { lookup: options.targets.lookup, timeout: options.timeoutMs } });
  }

  send(call: WebhookCall): void {
    const delivery = this.deliver(call)
      .catch((error: unknown) =>
        this.log.error({ err: error, delivery: call.deliveryId, tenant_id: call.tenant }, 'webhook delivery failed'),
      )
      .finally(() => this.inFlight.delete(delivery));
    this.inFlight.add(delivery);
  }

  /** Waits for deliveries under way (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  async close(): Promise<void> {
    await this.idle();
    if (!this.agent.closed) await this.agent.close();
  }

  private async deliver(call: WebhookCall): Promise<void> {
    const url = URL.parse(call.url);
    const fields = { url: url === null ? '[unparsable URL]' : loggableUrl(url), delivery: call.deliveryId };
    const problem = this.options.targets.problemWith(call.url);
    if (url === null || problem !== null) {
      this.log.warn({ ...fields, reason: problem }, 'webhook target refused; not sent');
      return;
    }
    const body = JSON.stringify(call.body);
    const backoff = this.options.backoffMs ?? defaultBackoff;
    for (let attempt = 1; attempt <= this.options.maxAttempts; attempt++) {
      if (attempt > 1) await new Promise((r) => setTimeout(r, backoff(attempt)));
      const outcome = await this.attempt(url, call, body, attempt, fields);
      if (outcome !== 'retry') return;
    }
    this.log.error(fields, 'webhook gave up after the last attempt');
  }

  private async attempt(
    url: URL,
    call: WebhookCall,
    body: string,
    attempt: number,
    fields: { url: string; delivery: string },
  ): Promise<Outcome> {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const secrets = await this.options.secrets(call.tenant);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'svc-webhooks/1',
      'x-svc-delivery': call.deliveryId,
      'x-svc-attempt': String(attempt),
      'x-svc-timestamp': timestamp,
      'x-svc-signature': secrets.map((secret) => signWebhook(secret, timestamp, body)).join(','),
    };
    if (url.username !== '') {
      const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
      headers.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
    }
    try {
      const response = await this.agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await response.body.dump();
      const status = response.statusCode;
      if (status >= 200 && status < 300) return 'delivered';
      if (status >= 500 || status === 429) {
        this.log.warn({ ...fields, status, attempt }, 'webhook failed; will retry');
        return 'retry';
      }
      const reason = status >= 300 && status < 400 ? 'redirect not followed' : 'refused by the receiver';
      this.log.warn({ ...fields, status, reason }, 'webhook not delivered; not retried');
      return 'final';
    } catch (error) {
      if (refusedTarget(error)) {
        this.log.warn({ ...fields, err: error }, 'webhook target refused; not sent');
        return 'final';
      }
      this.log.warn({ ...fields, err: error, attempt }, 'webhook unreachable; will retry');
      return 'retry';
    }
  }
}

/** The policy refused the resolved address; undici may wrap the lookup's error. */
function refusedTarget(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof WebhookTargetRefused) return true;
    if (e instanceof AggregateError && e.errors.some((inner) => inner instanceof WebhookTargetRefused)) return true;
  }
  return false;
}
