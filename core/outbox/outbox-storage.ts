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

/** An event's JSON, that text's size in bytes, and the JSON of its `data` (the bus's payload). */
interface EncodedEvent {
  json: string;
  size: number;
  /** Not known yet for an event read back as text, until it is published. */
  data?: string;
}

const encoded = new WeakMap<OutboxEvent, EncodedEvent>();

/**
 * The event's JSON, written around its payload's JSON (the text `JSON.stringify` makes of an
 * event as the outbox's type has it) so that the bus sends that same payload text.
 */
function encodedEvent(event: OutboxEvent): EncodedEvent {
  let known = encoded.get(event);
  if (known === undefined) {
    const data = JSON.stringify(event.data) as string | undefined;
    const json = `{"id":${JSON.stringify(event.id)},"subject":${JSON.stringify(event.subject)}${data === undefined ? '' : `,"data":${data}`}}`;
    known = { json, size: Buffer.byteLength(json), data };
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
 * The JSON of the event's `data`, as the bus publishes it: the text its admission made, rather
 * than the bus encoding the payload again.
 */
export function eventDataJson(event: OutboxEvent): string | undefined {
  const known = encodedEvent(event);
  known.data ??= JSON.stringify(event.data) as string | undefined;
  return known.data;
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
