import { z } from 'zod';

/** One event waiting for the bus: `id` is the msgId, so a replay is dropped by JetStream de-dup. */
export const outboxEventSchema = z.object({
  id: z.string().min(1).max(256),
  subject: z.string().min(1),
  data: z.unknown(),
});
export type OutboxEvent = z.infer<typeof outboxEventSchema>;

export interface OutboxEntry {
  /** Increasing in append (and commit) order. */
  key: number;
  event: OutboxEvent;
}

/**
 * Where an outbox keeps its events: append, read in order, remove once the bus took them. One
 * process writes a storage at a time. A PostgreSQL storage would implement the same, its
 * `appendInTransaction` taking the transaction handle of `withTransaction`.
 */
export interface OutboxStorage {
  /** Everything stored, read once at open: what a restart has to send. */
  stored(): OutboxEntry[];
  /** Writes events after the last one, as a write of its own; resolves once they are on disk. */
  append(events: readonly OutboxEvent[]): Promise<void>;
  /**
   * Writes events after the last one inside the caller's open transaction, so they commit or
   * roll back with the change they announce.
   */
  appendInTransaction(events: readonly OutboxEvent[]): void;
  /** The first entry after `key`, or undefined. */
  next(afterKey: number): OutboxEntry | undefined;
  remove(key: number): Promise<void>;
  close(): Promise<void>;
}
