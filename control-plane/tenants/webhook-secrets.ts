import { randomBytes } from 'node:crypto';
import type { Store } from '../store/store.ts';

interface SecretRecord {
  current: string;
  /** The secret before the last rotation, still signing until `previous_until`. */
  previous: string | null;
  previous_until: string | null;
  rotated_at: string;
}

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
  readonly #store: Store;
  readonly #clock: () => Date;
  readonly #graceMs: number;

  constructor(store: Store, clock: () => Date, graceMs: number) {
    this.#store = store;
    this.#clock = clock;
    this.#graceMs = graceMs;
  }

  /** Makes the first secret of a new tenant (inside its creation transaction); returns it. */
  issue(tenant: string): string {
    const secret = newSecret();
    this.#save(tenant, { current: secret, previous: null, previous_until: null, rotated_at: this.#now() });
    return secret;
  }

  /** Replaces the secret; the old one signs on for the grace period. Call inside a transaction. */
  rotate(tenant: string): RotatedSecret {
    const existing = this.#load(tenant);
    const now = this.#clock();
    const until = existing === undefined ? null : new Date(now.getTime() + this.#graceMs).toISOString();
    const secret = newSecret();
    this.#save(tenant, {
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
  signingSecrets(tenant: string): string[] {
    let record = this.#load(tenant);
    if (record === undefined) {
      this.#store.transaction(() => this.issue(tenant));
      record = this.#load(tenant)!;
    }
    const previousValid =
      record.previous !== null &&
      record.previous_until !== null &&
      this.#clock().getTime() < Date.parse(record.previous_until);
    return previousValid ? [record.current, record.previous!] : [record.current];
  }

  #load(tenant: string): SecretRecord | undefined {
    return this.#store.getGlobal<SecretRecord>('webhook_secret', tenant);
  }

  #save(tenant: string, record: SecretRecord): void {
    this.#store.putGlobal(record, 'webhook_secret', tenant);
  }

  #now(): string {
    return this.#clock().toISOString();
  }
}
