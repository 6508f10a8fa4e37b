import type { JobLeaseRepository } from '../storage.ts';
import type { Sync } from './promised.ts';

interface JobLease {
  holder: string;
  until: number;
}

/**
 * Job leases of the one process an LMDB environment serves: held in memory (a restarted process
 * need not wait out its predecessor's lease). A transaction's changes apply when it commits.
 */
export class JobLeases {
  readonly held = new Map<string, JobLease>();
}

export class LmdbJobs implements Sync<JobLeaseRepository> {
  readonly #leases: JobLeases;
  /** This transaction's changes: the new lease, or null for a release. */
  readonly #changes = new Map<string, JobLease | null>();

  constructor(leases: JobLeases) {
    this.#leases = leases;
  }

  tryAcquire(name: string, holder: string, ttlMs: number, now: Date): boolean {
    const current = this.#current(name);
    if (current !== undefined && current.holder !== holder && current.until > now.getTime()) return false;
    this.#changes.set(name, { holder, until: now.getTime() + ttlMs });
    return true;
  }

  release(name: string, holder: string): void {
    if (this.#current(name)?.holder === holder) this.#changes.set(name, null);
  }

  /** Applies the changes; called once the transaction committed. */
  commit(): void {
    for (const [name, lease] of this.#changes) {
      if (lease === null) this.#leases.held.delete(name);
      else this.#leases.held.set(name, lease);
    }
  }

  #current(name: string): JobLease | undefined {
    const changed = this.#changes.get(name);
    return changed === null ? undefined : (changed ?? this.#leases.held.get(name));
  }
}
