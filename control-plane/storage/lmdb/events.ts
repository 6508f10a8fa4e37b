import type { StoredEvent } from '../records.ts';
import type { EventFilter, EventRepository, Page, PageRequest } from '../storage.ts';
import type { Entry, KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOfScanned, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/** The arrival position, zero-padded so that key order is arrival order. */
const position = (seq: number) => String(seq).padStart(15, '0');

/**
 * Events under `[tenant, 'event', event_id]`, with two arrival-ordered indexes of their ids: the
 * tenant's (`event_log`, by position) and each envelope's (`[tenant, 'envelope_event', envelope,
 * position]`: a range of its own, which no other envelope's ids can enter, whatever they contain).
 * The position is the tenant's event sequence, `[tenant, 'meta', 'event_seq']`.
 */
export class LmdbEvents implements Sync<EventRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, eventId: string): StoredEvent | undefined {
    return this.#kv.get<StoredEvent>(this.#layout.tenant(tenant, 'event'), eventId);
  }

  list(tenant: string, filter: EventFilter, request?: PageRequest): Page<StoredEvent> {
    const { size, after } = pageStart(request);
    const ids =
      filter.envelopeId === undefined
        ? this.#kv.range<string>(this.#layout.tenant(tenant, 'event_log'), { reverse: true, after })
        : this.#kv.range<string>(this.#layout.nested(tenant, 'envelope_event', filter.envelopeId), {
            reverse: true,
            after,
          });
    const family = filter.eventType?.endsWith('.*') ? filter.eventType.slice(0, -1) : undefined;
    const events = this.#layout.tenant(tenant, 'event');
    const kv = this.#kv;
    function* stored(): Generator<Entry<StoredEvent | undefined>> {
      for (const { id, value } of ids) yield { id, value: kv.get<StoredEvent>(events, value) };
    }
    return pageOfScanned(
      stored(),
      (event): event is StoredEvent =>
        event !== undefined &&
        (filter.eventType === undefined ||
          (family !== undefined ? event.event_type.startsWith(family) : event.event_type === filter.eventType)),
      size,
    );
  }

  insertNew(tenant: string, events: readonly StoredEvent[]): string[] {
    const space = this.#layout.tenant(tenant, 'event');
    const meta = this.#layout.tenant(tenant, 'meta');
    const log = this.#layout.tenant(tenant, 'event_log');
    let seq = this.#kv.get<number>(meta, 'event_seq') ?? 0;
    const stored: string[] = [];
    for (const event of events) {
      if (this.#kv.get(space, event.event_id) !== undefined) continue;
      const at = position(++seq);
      this.#kv.put(space, event.event_id, event);
      this.#kv.put(log, at, event.event_id);
      this.#kv.put(this.#layout.nested(tenant, 'envelope_event', event.envelope_id), at, event.event_id);
      stored.push(event.event_id);
    }
    if (stored.length > 0) this.#kv.put(meta, 'event_seq', seq);
    return stored;
  }

  removeReceivedBefore(tenant: string, before: string, limit: number): number {
    const cutoff = Date.parse(before);
    const space = this.#layout.tenant(tenant, 'event');
    const log = this.#layout.tenant(tenant, 'event_log');
    const doomed: Array<{ at: string; event: StoredEvent | undefined; eventId: string }> = [];
    for (const { id, value } of this.#kv.range<string>(log)) {
      if (doomed.length >= limit) break;
      const event = this.#kv.get<StoredEvent>(space, value);
      if (event !== undefined && Date.parse(event.received_at) >= cutoff) break;
      doomed.push({ at: String(id), event, eventId: value });
    }
    // Removed after the walk: the range reads the staged view, which these removals change.
    for (const { at, event, eventId } of doomed) {
      this.#kv.remove(log, at);
      this.#kv.remove(space, eventId);
      if (event !== undefined) this.#kv.remove(this.#layout.nested(tenant, 'envelope_event', event.envelope_id), at);
    }
    return doomed.length;
  }
}
