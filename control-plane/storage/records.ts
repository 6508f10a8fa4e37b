import { z } from 'zod';
import { TimestampSchema } from '../../core/domain/index.ts';
import { UsageEventMessageSchema } from '../../core/events/messages.ts';

/**
 * The stored records that only the control plane keeps. Envelopes, budgets, policies, approvals,
 * API keys, tenants and audit records are the records of core/domain and core/policy.
 */

/** A usage event as applied: its cost in micro-dollars (priced when the event carried none). */
export const StoredEventSchema = UsageEventMessageSchema.extend({
  cost_micros: z.number().int().nonnegative(),
  received_at: TimestampSchema,
});
export type StoredEvent = z.infer<typeof StoredEventSchema>;

/** A proxy's slice of a budget (ARCHITECTURE §6). */
export const LeaseRecordSchema = z.object({
  lease_id: z.string(),
  holder: z.string(),
  budget_id: z.string(),
  /** Granted and not yet reported spent; null when that dimension is unlimited. */
  tokens: z.number().int().nonnegative().nullable(),
  micros: z.number().int().nonnegative().nullable(),
  expires_at: TimestampSchema,
});
export type LeaseRecord = z.infer<typeof LeaseRecordSchema>;

/** The last report of a holder's counted on a budget, and when. */
export const LeaseReportSchema = z.object({
  holder: z.string(),
  seq: z.number().int().nonnegative(),
  counted_at: TimestampSchema,
});
export type LeaseReport = z.infer<typeof LeaseReportSchema>;

/** Tokens and micro-dollars, the two dimensions a lease counts. */
export interface Spend {
  tokens: number;
  micros: number;
}

/** A tenant's HMAC key for its alert webhooks, with the one it replaced during the grace period. */
export const WebhookSecretRecordSchema = z.object({
  current: z.string(),
  /** The secret before the last rotation, still signing until `previous_until`. */
  previous: z.string().nullable(),
  previous_until: TimestampSchema.nullable(),
  rotated_at: TimestampSchema,
});
export type WebhookSecretRecord = z.infer<typeof WebhookSecretRecordSchema>;

/** The last record of a tenant's audit chain. */
export interface AuditHead {
  seq: number;
  hash: string;
}
