import type { JobLeaseRepository } from '../storage.ts';
import type { Sql } from './sql.ts';

/** Job leases shared by every replica: one row per job, taken over only once it expired. */
export class PgJobs implements JobLeaseRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async tryAcquire(name: string, holder: string, ttlMs: number, now: Date): Promise<boolean> {
    const { rowCount } = await this.#sql.query(
      `INSERT INTO job_leases AS j (name, holder, expires_at) VALUES ($1, $2, $4::timestamptz)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE j.holder = excluded.holder OR j.expires_at <= $3::timestamptz`,
      [name, holder, now.toISOString(), new Date(now.getTime() + ttlMs).toISOString()],
    );
    return rowCount === 1;
  }

  async release(name: string, holder: string): Promise<void> {
    await this.#sql.query('DELETE FROM job_leases WHERE name = $1 AND holder = $2', [name, holder]);
  }
}
