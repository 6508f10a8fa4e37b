import { z } from 'zod';
import { parseOrThrow } from '../errors/index.ts';

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

/** An event's JSON and that text's size in bytes, measured once per event object. */
interface EncodedEvent {
  json: string;
  size: number;
}

const encoded = new WeakMap<OutboxEvent, EncodedEvent>();

function encodedEvent(event: OutboxEvent): EncodedEvent {
  let known = encoded.get(event);
  if (known === undefined) {
    const json = JSON.stringify(event);
    known = { json, size: Buffer.byteLength(json) };
    encoded.set(event, known);
  }
  return known;
}

/**
 * The size an event counts for against the byte bounds: its JSON's. Measured once per event
 * object (events are not changed once admitted), so the admission's measure serves the storage's
 * count.
 */
export function eventSize(event: OutboxEvent): number {
  return encodedEvent(event).size;
}

/**
 * The event as JSON text, the text its admission measured: a storage keeps this instead of
 * encoding the event's object again.
 */
export function eventJson(event: OutboxEvent): string {
  return encodedEvent(event).json;
}

/**
 * The event a storage read back as the JSON text it kept (`eventJson`), remembered with that
 * text so that its size is not measured by encoding it again. A text that is no event throws.
 */
export function eventFromJson(json: string): OutboxEvent {
  const event = parseOrThrow(outboxEventSchema, JSON.parse(json), 'stored outbox event');
  encoded.set(event, { json, size: Buffer.byteLength(json) });
  return event;
}
