import { canonicalTime, type Envelope } from '../../../core/domain/index.ts';
import type { Approval } from '../../../core/policy/index.ts';
import type { Checkpoint } from '../../checkpoints/checkpoint.ts';
import { indexCheckpoint } from './checkpoints.ts';
import { REPORT, type ReportMark } from './leases.ts';
import { envelopeTimeKey } from '../storage.ts';
import type { StagedView } from './kv.ts';
import type { Key, Layout, TenantKind } from './layout.ts';

export interface Migration {
  version: number;
  name: string;
  /**
   * Rewrites records inside the migration's transaction. One that would rewrite many stages a
   * batch at a time: it returns the key to go on from, the runner commits the batch in a
   * transaction of its own and calls it again with that key; the last batch (returning nothing)
   * commits with the new schema version. A batch left half way is found again at the next start:
   * such a migration must leave alone what an earlier batch rewrote.
   */
  up(kv: StagedView, layout: Layout, from?: Key): Key | undefined;
}

/** Records a batched migration stages per transaction, so that a large store makes no huge write set. */
export const MIGRATION_BATCH = 1000;

/** Above every kind and id a key of `tenant_data` holds (the largest code point). */
const TOP = '\u{10FFFF}';

/** The first tenant whose records are at or after `start`, found by one seek; none past the last. */
function tenantFrom(layout: Layout, start: Key | undefined): string | number | undefined {
  for (const key of layout.data.getKeys(start === undefined ? { limit: 1 } : { start, limit: 1 })) return key[0];
  return undefined;
}

/**
 * The records of `kinds` in `tenant_data`, tenant by tenant in key order, from `from` on: each
 * tenant's range of each kind is read, and everything else is passed over by one seek per tenant
 * (keys begin with the tenant), not read: an upgrade of a store holding millions of events reads
 * its envelopes, not every event ever recorded.
 */
function* recordsOf(layout: Layout, kinds: readonly TenantKind[], from?: Key): Generator<{ key: Key; value: unknown }> {
  const sorted = [...kinds].sort();
  for (
    let tenant = tenantFrom(layout, from === undefined ? undefined : [from[0]!]);
    tenant !== undefined;
    tenant = tenantFrom(layout, [tenant, TOP])
  ) {
    for (const kind of sorted) {
      const resumes = from !== undefined && from[0] === tenant;
      if (resumes && kind < String(from[1])) continue;
      const start = resumes && kind === from[1] ? from : [tenant, kind];
      yield* layout.data.getRange({ start, end: [tenant, kind, TOP] });
    }
  }
}

/** An envelope with its times in the canonical form (the same object when they were already). */
function withCanonicalTimes(envelope: Envelope): Envelope {
  const created = canonicalTime(envelope.created_at);
  const updated = canonicalTime(envelope.updated_at);
  const completed = envelope.completed_at === null ? null : canonicalTime(envelope.completed_at);
  if (created === envelope.created_at && updated === envelope.updated_at && completed === envelope.completed_at)
    return envelope;
  return { ...envelope, created_at: created, updated_at: updated, completed_at: completed };
}

/**
 * Numbered schema migrations of the LMDB layout, applied in order at start inside one transaction
 * each. A migration never changes once released; a new change is a new number.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial layout: tenant-prefixed records, global key index',
    up: () => {
      // Version 1 is the layout itself; nothing to convert.
    },
  },
  {
    version: 2,
    name: 'envelopes indexed by creation time (`envelope_time`), for the newest-first list',
    up: (kv, layout) => {
      for (const { key, value } of recordsOf(layout, ['envelope'])) {
        const [tenant] = key;
        if (typeof tenant !== 'string') continue;
        const envelope = value as Envelope;
        kv.put(layout.tenant(tenant, 'envelope_time'), envelopeTimeKey(envelope), envelope.envelope_id);
      }
    },
  },
  {
    version: 3,
    name: 'lease report numbers stamped with when they were counted (`counted_at`), for retention',
    up: (kv, layout) => {
      // Numbers counted before are taken as counted now: retention keeps them its full age from here.
      const now = new Date().toISOString();
      for (const { key, value } of recordsOf(layout, ['lease'])) {
        const [tenant, , id] = key;
        if (typeof tenant !== 'string' || typeof id !== 'string' || !id.startsWith(REPORT)) continue;
        const mark = value as Partial<ReportMark>;
        if (mark.counted_at === undefined) kv.put(layout.tenant(tenant, 'lease'), id, { ...mark, counted_at: now });
      }
    },
  },
  {
    version: 4,
    name: 'per-envelope event and per-budget live envelope indexes as ranges of their own',
    up: (kv, layout) => {
      // `<envelope>/<position>` and `<budget>/<envelope>` let an id holding "/" into another's
      // range. The value (event id, envelope id) or the position, which hold no "/", split them.
      for (const { key, value } of recordsOf(layout, ['envelope_event', 'budget_envelope'])) {
        const [tenant, kind, id] = key;
        if (key.length !== 3 || typeof tenant !== 'string' || typeof id !== 'string') continue;
        if (kind === 'envelope_event') {
          const cut = id.lastIndexOf('/');
          kv.put(layout.nested(tenant, kind, id.slice(0, cut)), id.slice(cut + 1), value);
        } else if (kind === 'budget_envelope') {
          const envelopeId = value as string;
          kv.put(layout.nested(tenant, kind, id.slice(0, -envelopeId.length - 1)), envelopeId, value);
        } else continue;
        kv.remove(layout.tenant(tenant, kind), id);
      }
    },
  },
  {
    version: 5,
    name: 'approvals indexed by status (`approval_status`), for the list of one status',
    up: (kv, layout) => {
      for (const { key, value } of recordsOf(layout, ['approval'])) {
        const [tenant] = key;
        if (typeof tenant !== 'string') continue;
        const approval = value as Approval;
        kv.put(layout.nested(tenant, 'approval_status', approval.status), approval.approval_id, true);
      }
    },
  },
  {
    version: 6,
    name: 'checkpoint summaries without data (`checkpoint_summary`) and a time index per execution (`checkpoint_exec_time`)',
    up: (kv, layout) => {
      for (const { key, value } of recordsOf(layout, ['checkpoint'])) {
        const [tenant] = key;
        if (typeof tenant !== 'string' || key.length !== 4) continue;
        indexCheckpoint(kv, layout, tenant, value as Checkpoint);
      }
    },
  },
  {
    version: 7,
    name: 'records written as msgpack maps (`RECORD_ENCODING`), which a build before this version would misread',
    up: () => {
      // Records written before stay as they are: the decoder reads them too.
    },
  },
  {
    version: 8,
    name: 'envelope times in the canonical form (UTC, milliseconds), re-keyed in the creation time index',
    up: (kv, layout, from) => {
      // Times were kept as written, offsets and any number of digits included: the index by
      // creation time ordered them by text, which is not time order. `from` is the last envelope
      // of the batch before, already rewritten: read again, it is left as it is.
      for (const { key, value } of recordsOf(layout, ['envelope'], from)) {
        const [tenant, , id] = key;
        if (key.length !== 3 || typeof tenant !== 'string' || typeof id !== 'string') continue;
        const envelope = value as Envelope;
        const canonical = withCanonicalTimes(envelope);
        if (canonical === envelope) continue;
        kv.put(layout.tenant(tenant, 'envelope'), id, canonical);
        if (canonical.created_at !== envelope.created_at) {
          const index = layout.tenant(tenant, 'envelope_time');
          kv.remove(index, envelopeTimeKey(envelope));
          kv.put(index, envelopeTimeKey(canonical), id);
        }
        if (kv.size >= MIGRATION_BATCH) return key;
      }
    },
  },
];

export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));
