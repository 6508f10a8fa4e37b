import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { BusLogger, Signals } from '../../core/bus/bus.ts';
import { throttledWarn } from '../../core/bus/throttled-warn.ts';
import { MinuteCounts, minuteOf } from './minute-counts.ts';

/**
 * How long a count waits to be announced together with those made meanwhile: with NATS's
 * transit, how late the other replicas count it. A flood makes one message per interval and
 * replica, not one per count.
 */
export const ANNOUNCE_AFTER_MS = 20;

/** Keys one announcement names at most: with keys of 256 characters, about 300 KB, under NATS's 1 MiB. */
export const KEYS_PER_ANNOUNCEMENT = 1024;

/** What is counted per key and minute, and where the replicas announce it. */
export interface CountedKind {
  /** The plain-NATS subject the control-plane replicas announce on, and only they may use (docs/nats.md). */
  subject: string;
  /** The longest key an announcement names: a longer one is counted, and announced, by its digest (`sharedKey`). */
  maxKeyChars: number;
  /** Keys counted, here and as announced: past it the least recently counted is forgotten. */
  capacity: number;
  /** What is counted, in log lines: `failed authentications`, `requests`. */
  label: string;
}

/**
 * Why an announcement was lost: not sent (NATS away, the publication failed), dropped on arrival
 * (the handlers all busy), or refused on arrival (it does not validate: a replica of another
 * build, or a forgery where the tenant-isolation accounts are not in place).
 */
export type AnnouncementLoss = 'not_sent' | 'dropped' | 'refused';

/** What announcing over NATS needs; absent in standalone mode, where this process is the only replica. */
export interface Sharing {
  signals: Signals;
  connected: () => boolean;
  /** Epoch milliseconds. */
  now: () => number;
  logger: BusLogger;
  /** Told of each announcement lost, for `svc_announcements_lost_total`. */
  lost: (subject: string, reason: AnnouncementLoss) => void;
}

/** Counts per key and wall-clock minute, of this replica and of those that announced theirs. */
export interface SharedMinuteCounts {
  /** The count of `key` in `minute`, the current one. */
  count(key: string, minute: number): number;
  /** Counts one of `key` in `minute`, the current one, and announces it to the other replicas. */
  add(key: string, minute: number): void;
  /** Announces what is pending and stops listening. */
  stop(): Promise<void>;
}

/** `kind.subject`: what one replica counted since its last announcement. */
function announcementSchema(maxKeyChars: number) {
  return z.object({
    /** Drawn at start: a replica skips its own announcements, which NATS echoes back to it. */
    replica: z.string().min(1).max(64),
    /** The wall-clock minute the counts were made in, by the announcing replica's clock. */
    minute: z.int().nonnegative(),
    counts: z
      .array(z.object({ key: z.string().min(1).max(maxKeyChars), count: z.int().positive() }))
      .min(1)
      .max(KEYS_PER_ANNOUNCEMENT),
  });
}
type Announcement = z.infer<ReturnType<typeof announcementSchema>>;

const DIGEST_PREFIX = 'sha256:';

/**
 * The key a count is made and announced under: `key` itself when an announcement can name it,
 * else its SHA-256, so a caller whose key is too long to announce (a JWT with a long `sub`) is
 * still held to one limit over every replica. Keys of both kinds never take this form (a
 * principal's starts with its type, an address is no digest), so a digest counts for its key alone.
 */
export function sharedKey(key: string, maxKeyChars: number): string {
  if (key.length <= maxKeyChars) return key;
  return DIGEST_PREFIX + createHash('sha256').update(key).digest('base64url');
}

/** The counts of a replica that is the only one: nothing is announced or heard. */
export function localMinuteCounts(capacity: number): SharedMinuteCounts {
  const counts = new MinuteCounts(capacity);
  return {
    count: (key, minute) => counts.count(key, minute),
    add: (key, minute) => counts.add(key, minute, 1, minute),
    stop: () => Promise.resolve(),
  };
}

/**
 * The counts of one replica among several: each count made here is announced on `kind.subject`
 * (plain NATS), and each announcement of another replica is added to the same in-memory counts,
 * so nothing on a request's path waits on NATS. While NATS is away nothing is sent or received
 * and each replica counts its own. Without `sharing` (standalone mode) the counts are local.
 */
export async function minuteCounts(kind: CountedKind, sharing: Sharing | undefined): Promise<SharedMinuteCounts> {
  if (sharing === undefined) return localMinuteCounts(kind.capacity);
  const counts = new MinuteCounts(kind.capacity);
  const replica = randomUUID();
  const outgoing = new Outgoing(replica, kind, sharing);
  const schema = announcementSchema(kind.maxKeyChars);
  const refused = throttledWarn(sharing.logger, `${kind.label} announcement refused: it does not validate`);
  // Synchronous and bounded by the schema: a flood of announcements costs a map update per key
  // and cannot queue work behind the requests.
  const subscription = await sharing.signals.subscribeSignals(
    kind.subject,
    (data) => {
      const parsed = schema.safeParse(data);
      if (!parsed.success) {
        sharing.lost(kind.subject, 'refused');
        return refused({ issues: parsed.error.issues.map((issue) => issue.path.join('.')) });
      }
      if (parsed.data.replica === replica) return;
      const now = minuteOf(sharing.now());
      for (const { key, count } of parsed.data.counts) counts.add(key, parsed.data.minute, count, now);
    },
    { dropped: () => sharing.lost(kind.subject, 'dropped') },
  );
  return {
    count: (key, minute) => counts.count(sharedKey(key, kind.maxKeyChars), minute),
    add(key, minute) {
      const shared = sharedKey(key, kind.maxKeyChars);
      counts.add(shared, minute, 1, minute);
      outgoing.add(shared, minute);
    },
    async stop() {
      outgoing.send();
      await subscription.unsubscribe();
    },
  };
}

/** The counts made here and not yet announced, of one minute. */
class Outgoing {
  readonly #replica: string;
  readonly #kind: CountedKind;
  readonly #sharing: Sharing;
  readonly #unsent: ReturnType<typeof throttledWarn>;
  #minute = 0;
  #keys = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(replica: string, kind: CountedKind, sharing: Sharing) {
    this.#replica = replica;
    this.#kind = kind;
    this.#sharing = sharing;
    this.#unsent = throttledWarn(sharing.logger, `${kind.label} not announced to the other replicas`);
  }

  add(key: string, minute: number): void {
    if (minute !== this.#minute) this.send();
    this.#minute = minute;
    this.#keys.set(key, (this.#keys.get(key) ?? 0) + 1);
    if (this.#keys.size >= KEYS_PER_ANNOUNCEMENT) this.send();
    else this.#timer ??= setTimeout(() => this.send(), ANNOUNCE_AFTER_MS);
  }

  /**
   * Publishes what is pending. Not while NATS is away: the client would queue it for the
   * reconnection, when its minute may be over, in the buffer the other publications need.
   */
  send(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#keys.size === 0) return;
    const announcement: Announcement = {
      replica: this.#replica,
      minute: this.#minute,
      counts: Array.from(this.#keys, ([key, count]) => ({ key, count })),
    };
    this.#keys = new Map();
    const { subject } = this.#kind;
    const unsent = (fields: Record<string, unknown>) => {
      this.#sharing.lost(subject, 'not_sent');
      this.#unsent(fields, announcement.counts.length);
    };
    if (!this.#sharing.connected()) return unsent({ reason: 'NATS not connected' });
    this.#sharing.signals
      .publishSignal(subject, announcement)
      .catch((error: unknown) => unsent({ err: (error as Error).message }));
  }
}
