import type { Pool } from 'pg';
import {
  eventSize,
  type OutboxClaim,
  type OutboxDepth,
  type OutboxEvent,
  type OutboxStorage,
} from '../../../core/outbox/outbox-storage.ts';
import type { OutboxRepository } from '../storage.ts';
import { int, type Sql } from './sql.ts';

/** How long a counted depth serves (changes this process makes count at once). */
const DEPTH_TTL_MS = 1000;
/**
 * A claim holds its rows locked in an open transaction while the publisher sends them; a claim
 * left open longer than this (a hung publish) loses its session, and its events go to the next claim.
 */
const CLAIM_IDLE_TIMEOUT = '60s';

/** Appends events in one statement, in order: the key (an identity) follows append order. */
async function insertEvents(sql: Sql, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await sql.query(
    `INSERT INTO outbox (event, bytes)
     SELECT d.event, d.bytes FROM unnest($1::json[], $2::integer[]) WITH ORDINALITY AS d(event, bytes, n) ORDER BY d.n`,
    [events.map((e) => JSON.stringify(e)), events.map(eventSize)],
  );
}

/** A transaction's appends: rows in the `outbox` table, committed or rolled back with it. */
export class PgOutboxAppends implements OutboxRepository {
  readonly #sql: Sql;
  appended = false;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async append(events: readonly OutboxEvent[]): Promise<void> {
    await insertEvents(this.#sql, events);
    if (events.length > 0) this.appended = true;
  }
}

/**
 * The drain side, shared by every replica: a claim locks the oldest rows no other claim holds
 * (`FOR UPDATE SKIP LOCKED`) in a transaction of its own, and settling deletes the sent ones and
 * commits. A replica that dies holding a claim loses its session, which frees the rows.
 */
export class PgOutboxStorage implements OutboxStorage {
  readonly #pool: Pool;
  /**
   * Where the depth is counted: not the transactions' pool, because admission asks for the depth
   * inside a transaction, and with every connection held by such a transaction none would be free.
   */
  readonly #side: Pool;
  readonly #onError: (error: unknown) => void;
  #depth: { value: OutboxDepth; at: number } | null = null;
  #counting: Promise<OutboxDepth> | null = null;

  constructor(pool: Pool, side: Pool, onError: (error: unknown) => void) {
    this.#pool = pool;
    this.#side = side;
    this.#onError = onError;
  }

  /** Forgets the counted depth: this process changed the outbox. */
  changed(): void {
    this.#depth = null;
  }

  async depth(): Promise<OutboxDepth> {
    if (this.#depth !== null && Date.now() - this.#depth.at < DEPTH_TTL_MS) return { ...this.#depth.value };
    // Concurrent askers share one count.
    this.#counting ??= this.#count().finally(() => (this.#counting = null));
    return { ...(await this.#counting) };
  }

  async #count(): Promise<OutboxDepth> {
    const at = Date.now();
    const { rows } = await this.#side.query<{ entries: string; bytes: string }>(
      'SELECT count(*) AS entries, coalesce(sum(bytes), 0) AS bytes FROM outbox',
    );
    const value = { entries: int(rows[0]!.entries), bytes: int(rows[0]!.bytes) };
    this.#depth = { value, at };
    return value;
  }

  async append(events: readonly OutboxEvent[]): Promise<void> {
    await insertEvents(this.#pool, events);
    this.changed();
  }

  async claim(limit: number): Promise<OutboxClaim> {
    const client = await this.#pool.connect();
    // A session lost while the claim is held must not go unheard (an unheard error ends the process).
    const onError = (error: unknown) => this.#onError(error);
    client.on('error', onError);
    const done = (destroy: boolean) => {
      client.off('error', onError);
      client.release(destroy);
    };
    let rows: Array<{ key: string; event: OutboxEvent }>;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL idle_in_transaction_session_timeout = '${CLAIM_IDLE_TIMEOUT}'`);
      ({ rows } = await client.query<{ key: string; event: OutboxEvent }>(
        'SELECT key, event FROM outbox ORDER BY key LIMIT $1 FOR UPDATE SKIP LOCKED',
        [limit],
      ));
      if (rows.length === 0) await client.query('COMMIT');
    } catch (error) {
      done(true);
      throw error;
    }
    if (rows.length === 0) {
      done(false);
      return { entries: [], settle: () => Promise.resolve() };
    }
    let settled = false;
    return {
      entries: rows.map((r) => ({ key: int(r.key), event: r.event })),
      settle: async (doneKeys) => {
        if (settled) return;
        settled = true;
        let broken = false;
        try {
          if (doneKeys.length > 0)
            await client.query('DELETE FROM outbox WHERE key = ANY($1::bigint[])', [[...doneKeys]]);
          await client.query('COMMIT');
          this.changed();
        } catch (error) {
          broken = true;
          throw error;
        } finally {
          done(broken);
        }
      },
    };
  }

  /** The pool is the storage's; it closes it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
