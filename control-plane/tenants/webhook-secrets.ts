import { randomBytes } from 'node:crypto';
import type { WebhookSecretRecord } from '../storage/records.ts';
import type { Repositories, Storage } from '../storage/storage.ts';

export interface RotatedSecret {
  secret: string;
  /** Until when deliveries also carry a signature made with the replaced secret. */
  previous_valid_until: string | null;
}

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/**
 * Each tenant's HMAC key for its alert webhooks: made with the tenant, shown once, rotatable.
 * After a rotation the replaced key keeps signing for a grace period beside the new one, so
 * receivers can switch without losing deliveries (docs/budgets.md).
 */
export class WebhookSecrets {
  readonly #storage: Storage;
  readonly #clock: () => Date;
  readonly #graceMs: number;

  constructor(storage: Storage, clock: () => Date, graceMs: number) {
    this.#storage = storage;
    this.#clock = clock;
    this.#graceMs = graceMs;
  }

  /** Makes the first secret of a tenant in the caller's transaction; returns the tenant's secret. */
  async issue(tx: Repositories, tenant: string): Promise<string> {
    const record = await tx.tenants.issueWebhookSecret(tenant, {
      current: newSecret(),
      previous: null,
      previous_until: null,
      rotated_at: this.#clock().toISOString(),
    });
    return record.current;
  }

  /** Replaces the secret in the caller's transaction; the old one signs on for the grace period. */
  async rotate(tx: Repositories, tenant: string): Promise<RotatedSecret> {
    const existing = await tx.tenants.webhookSecret(tenant);
    const now = this.#clock();
    const until = existing === undefined ? null : new Date(now.getTime() + this.#graceMs).toISOString();
    const secret = newSecret();
    await tx.tenants.putWebhookSecret(tenant, {
      current: secret,
      previous: existing?.current ?? null,
      previous_until: until,
      rotated_at: now.toISOString(),
    });
    return { secret, previous_valid_until: until };
  }

  /**
   * The keys a delivery of this tenant is signed with now, newest first. A tenant without one
   * (the system tenant, tenants made before webhook secrets existed) gets one on first use; the
   * operator learns it by rotating.
   */
  async signingSecrets(tenant: string): Promise<string[]> {
    const record: WebhookSecretRecord =
      (await this.#storage.read.tenants.webhookSecret(tenant)) ??
      (await this.#storage.withTransaction(async (tx) => {
        await this.issue(tx, tenant);
        return (await tx.tenants.webhookSecret(tenant))!;
      }));
    const previousValid =
      record.previous !== null &&
      record.previous_until !== null &&
      this.#clock().getTime() < Date.parse(record.previous_until);
    return previousValid ? [record.current, record.previous!] : [record.current];
  }
}
