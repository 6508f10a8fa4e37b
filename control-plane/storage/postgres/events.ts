import type { StoredEvent } from '../records.ts';
import type { EventFilter, EventRepository, Page, PageRequest } from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import { int, type Sql } from './sql.ts';

interface Row {
  arrival: string;
  doc: StoredEvent;
}

/** Events keyed by tenant and event id (the idempotency key), ordered by `arrival`. */
export class PgEvents implements EventRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, eventId: string): Promise<StoredEvent | undefined> {
    const { rows } = await this.#sql.query<Row>('SELECT doc FROM events WHERE tenant_id = $1 AND event_id = $2', [
      tenant,
      eventId,
    ]);
    return rows[0]?.doc;
  }

  async list(tenant: string, filter: EventFilter, request?: PageRequest): Promise<Page<StoredEvent>> {
    const { size, after } = pageStart<number>(request, 'number');
    const family = filter.eventType?.endsWith('.*') === true ? filter.eventType.slice(0, -1) : null;
    const exact = family === null ? (filter.eventType ?? null) : null;
    const { rows } = await this.#sql.query<Row>(
      `SELECT arrival, doc FROM events WHERE tenant_id = $1 AND ($2::bigint IS NULL OR arrival < $2)
         AND ($3::text IS NULL OR envelope_id = $3) AND ($4::text IS NULL OR event_type = $4)
         AND ($5::text IS NULL OR starts_with(event_type, $5))
       ORDER BY arrival DESC LIMIT $6`,
      [tenant, after, filter.envelopeId ?? null, exact, family, size + 1],
    );
    return pageOf(
      rows,
      size,
      (r) => int(r.arrival),
      (r) => r.doc,
    );
  }

  async insertNew(tenant: string, events: readonly StoredEvent[]): Promise<string[]> {
    const unique = new Map<string, StoredEvent>();
    for (const event of events) if (!unique.has(event.event_id)) unique.set(event.event_id, event);
    if (unique.size === 0) return [];
    const batch = [...unique.values()];
    // An id another transaction is inserting waits for it, then counts as stored: a replayed or
    // duplicated event is counted once across replicas.
    const { rows } = await this.#sql.query<{ event_id: string }>(
      `INSERT INTO events (tenant_id, event_id, envelope_id, event_type, doc)
       SELECT $1, d.event_id, d.envelope_id, d.event_type, d.doc
       FROM unnest($2::text[], $3::text[], $4::text[], $5::json[]) WITH ORDINALITY AS d(event_id, envelope_id, event_type, doc, n)
       ORDER BY d.n
       ON CONFLICT DO NOTHING RETURNING event_id`,
      [
        tenant,
        batch.map((e) => e.event_id),
        batch.map((e) => e.envelope_id),
        batch.map((e) => e.event_type),
        batch.map((e) => JSON.stringify(e)),
      ],
    );
    const stored = new Set(rows.map((r) => r.event_id));
    return batch.filter((e) => stored.has(e.event_id)).map((e) => e.event_id);
  }

  async removeReceivedBefore(tenant: string, before: string, limit: number): Promise<number> {
    // Walks the (tenant, arrival) index from the oldest: a bounded statement however many events
    // the tenant has, and the events arriving meanwhile (the newest) are never touched.
    const { rowCount } = await this.#sql.query(
      `WITH oldest AS (
         SELECT arrival, (doc->>'received_at')::timestamptz < $2::timestamptz AS old
         FROM events WHERE tenant_id = $1 ORDER BY arrival LIMIT $3
       )
       DELETE FROM events WHERE tenant_id = $1 AND arrival IN (
         SELECT o.arrival FROM oldest o
         WHERE NOT EXISTS (SELECT 1 FROM oldest n WHERE NOT n.old AND n.arrival <= o.arrival)
       )`,
      [tenant, before, limit],
    );
    return rowCount ?? 0;
  }
}
