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

/** What an outbox holds: events, and their size as JSON (the bounds count both). */
export interface OutboxDepth {
  entries: number;
  bytes: number;
}

/** Events claimed by one drainer: no other claim is handed them until `settle`. */
export interface OutboxClaim {
  /** Oldest first. */
  entries: OutboxEntry[];
  /** Removes the entries with these keys (the bus took them) and gives the others back. */
  settle(doneKeys: readonly number[]): Promise<void>;
}

/**
 * Where an outbox keeps its events, for the publisher that drains it: the proxy's LMDB, or the
 * control plane's storage (which appends inside its transactions, `tx.outbox.append`). Claims
 * hand each event to one drainer at a time, so that several processes may drain one storage
 * (PostgreSQL: `FOR UPDATE SKIP LOCKED`); a claim that is never settled (a crash) is claimed
 * again later, and the bus's de-duplication by msgId drops what was sent twice.
 */
export interface OutboxStorage {
  /** Everything held, by every writer (a backend where counting is costly may cache it briefly). */
  depth(): Promise<OutboxDepth>;
  /** Writes events after the last one, as a write of its own; resolves once they are on disk. */
  append(events: readonly OutboxEvent[]): Promise<void>;
  /** Up to `limit` of the oldest events no other claim holds, in order. */
  claim(limit: number): Promise<OutboxClaim>;
  close(): Promise<void>;
}

const sizes = new WeakMap<OutboxEvent, number>();

/**
 * The size an event counts for against the byte bounds. Measured once per event object (events
 * are not changed once admitted), so the admission's measure serves the storage's count.
 */
export function eventSize(event: OutboxEvent): number {
  let size = sizes.get(event);
  if (size === undefined) {
    size = Buffer.byteLength(JSON.stringify(event));
    sizes.set(event, size);
  }
  return size;
}
