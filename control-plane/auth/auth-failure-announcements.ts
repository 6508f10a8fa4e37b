import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { BusLogger, Signals } from '../../core/bus/bus.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { throttledWarn } from '../../core/bus/throttled-warn.ts';
import { createAuthFailureLimit, type AuthFailureLimit } from './request-rate.ts';

/**
 * How long a failure waits to be announced together with those made meanwhile: with NATS's
 * transit, how late the other replicas count it. A flood of failures makes one message per
 * interval, not one per failure.
 */
export const ANNOUNCE_AFTER_MS = 20;

/** Clients one announcement names at most, which keeps it near 100 KB, well under NATS's 1 MiB. */
const CLIENTS_PER_ANNOUNCEMENT = 1024;

/**
 * The longest client an announcement names: an IPv6 /64 is 42 characters. A longer one (an
 * address no parser reads) is counted by the replica that saw it only.
 */
const MAX_CLIENT_CHARS = 64;

/** `svc.system.auth-failures`: failures one replica counted since its last announcement. */
const AnnouncementSchema = z.object({
  /** Drawn at start: a replica skips its own announcements, which NATS echoes back to it. */
  replica: z.string().min(1).max(64),
  /** The wall-clock minute the failures were made in, by the announcing replica's clock. */
  minute: z.int().nonnegative(),
  failures: z
    .array(z.object({ client: z.string().min(1).max(MAX_CLIENT_CHARS), count: z.int().positive() }))
    .min(1)
    .max(CLIENTS_PER_ANNOUNCEMENT),
});
type Announcement = z.infer<typeof AnnouncementSchema>;

export interface SharedAuthFailures {
  limit: AuthFailureLimit;
  /** Announces what is pending and stops listening. */
  stop(): Promise<void>;
}

/**
 * The failed-authentication limit of one replica among several: each failure counted here is
 * announced on `svc.system.auth-failures` (plain NATS, which only the control plane's
 * credentials may publish or read, docs/nats.md), and each announcement of another replica is
 * counted into the same in-memory counts the requests are checked against, so a request never
 * waits on NATS. While NATS is away nothing is sent or received and each replica counts its own.
 */
export async function shareAuthFailures(
  perMinute: number,
  deps: { signals: Signals; connected: () => boolean; now: () => number; logger: BusLogger },
): Promise<SharedAuthFailures> {
  const replica = randomUUID();
  const outgoing = new Outgoing(replica, deps);
  const limit = createAuthFailureLimit(perMinute, {
    now: deps.now,
    onFailure: (client, minute) => outgoing.add(client, minute),
  });
  const refused = throttledWarn(deps.logger, 'failed-authentication announcement refused: it does not validate');
  // Synchronous and bounded by the schema: a flood of announcements costs a map update per client
  // and cannot queue work behind the requests.
  const subscription = await deps.signals.subscribeSignals(subjects.authFailures, (data) => {
    const parsed = AnnouncementSchema.safeParse(data);
    if (!parsed.success) return refused({ issues: parsed.error.issues.map((issue) => issue.path.join('.')) });
    if (parsed.data.replica === replica) return;
    for (const { client, count } of parsed.data.failures) limit.addAnnounced(client, parsed.data.minute, count);
  });
  return {
    limit,
    async stop() {
      outgoing.send();
      await subscription.unsubscribe();
    },
  };
}

/** The failures counted here and not yet announced, of one minute. */
class Outgoing {
  readonly #replica: string;
  readonly #deps: { signals: Signals; connected: () => boolean };
  readonly #unsent: ReturnType<typeof throttledWarn>;
  #minute = 0;
  #clients = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(replica: string, deps: { signals: Signals; connected: () => boolean; logger: BusLogger }) {
    this.#replica = replica;
    this.#deps = deps;
    this.#unsent = throttledWarn(deps.logger, 'failed authentications not announced to the other replicas');
  }

  add(client: string, minute: number): void {
    if (client.length > MAX_CLIENT_CHARS) return;
    if (minute !== this.#minute) this.send();
    this.#minute = minute;
    this.#clients.set(client, (this.#clients.get(client) ?? 0) + 1);
    if (this.#clients.size >= CLIENTS_PER_ANNOUNCEMENT) this.send();
    else this.#timer ??= setTimeout(() => this.send(), ANNOUNCE_AFTER_MS);
  }

  /**
   * Publishes what is pending. Not while NATS is away: the client would queue it for the
   * reconnection, when its minute may be over, in the buffer the other publications need.
   */
  send(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#clients.size === 0) return;
    const announcement: Announcement = {
      replica: this.#replica,
      minute: this.#minute,
      failures: Array.from(this.#clients, ([client, count]) => ({ client, count })),
    };
    this.#clients = new Map();
    if (!this.#deps.connected()) return this.#unsent({ reason: 'NATS not connected' }, announcement.failures.length);
    this.#deps.signals
      .publishSignal(subjects.authFailures, announcement)
      .catch((error: unknown) => this.#unsent({ err: (error as Error).message }, announcement.failures.length));
  }
}
