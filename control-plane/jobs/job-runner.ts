import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Storage } from '../storage/storage.ts';

/** Background work that must run on one replica at a time. */
export interface Job {
  name: string;
  /** Time between the end of one run and the start of the next. */
  intervalMs: number;
  run(signal: AbortSignal): Promise<void>;
}

export interface JobRunnerOptions {
  storage: Storage;
  /** This process, unique among the replicas (host, pid and a random part). */
  holder: string;
  /**
   * How long a job's lease lasts without renewal: the time another replica waits before it takes
   * over from one that died. Renewed every third of it while the holder lives.
   */
  leaseTtlMs: number;
  clock: () => Date;
  logger: Logger;
}

/**
 * Runs each job on the one replica holding its lease (`jobs.tryAcquire` in the shared store). The
 * holder renews the lease every third of its time to live, running or not, so the job stays with
 * it; a replica that stops gives its leases up, one that dies loses them when they expire. A job
 * run that fails is logged and tried again at its next turn.
 */
export class JobRunner {
  readonly #options: JobRunnerOptions;
  readonly #abort = new AbortController();
  readonly #loops: Promise<void>[] = [];
  /** Runs completed by this replica, per job (for tests and metrics). */
  readonly runs = new Map<string, number>();

  constructor(options: JobRunnerOptions) {
    this.#options = options;
  }

  start(jobs: readonly Job[]): void {
    for (const job of jobs) this.#loops.push(this.#loop(job));
  }

  /** Stops at once: a running job is aborted and awaited, then the leases are given up. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await Promise.all(this.#loops.splice(0));
  }

  async #holds(name: string): Promise<boolean> {
    const { storage, holder, leaseTtlMs, clock } = this.#options;
    return storage.withTransaction((tx) => tx.jobs.tryAcquire(name, holder, leaseTtlMs, clock()));
  }

  async #loop(job: Job): Promise<void> {
    const { signal } = this.#abort;
    const renewMs = Math.max(1, Math.floor(this.#options.leaseTtlMs / 3));
    let nextRun = 0;
    let held = false;
    while (!signal.aborted) {
      try {
        held = await this.#holds(job.name);
        if (held && Date.now() >= nextRun) {
          await this.#run(job, renewMs);
          nextRun = Date.now() + job.intervalMs;
        }
      } catch (error) {
        if (signal.aborted) break;
        this.#options.logger.warn({ err: error, job: job.name }, 'background job failed; tried again at its next turn');
        nextRun = Date.now() + job.intervalMs;
      }
      const wait = held ? Math.min(renewMs, Math.max(0, nextRun - Date.now())) : renewMs;
      await sleep(wait, undefined, { signal }).catch(() => undefined);
    }
    if (held) {
      await this.#options.storage
        .withTransaction((tx) => tx.jobs.release(job.name, this.#options.holder))
        .catch((error: unknown) =>
          this.#options.logger.warn({ err: error, job: job.name }, 'job lease not given up; it expires'),
        );
    }
  }

  /** One run, with the lease renewed meanwhile; a lost lease aborts the run. */
  async #run(job: Job, renewMs: number): Promise<void> {
    const run = new AbortController();
    const stop = () => run.abort();
    this.#abort.signal.addEventListener('abort', stop, { once: true });
    const renewal = setInterval(() => {
      this.#holds(job.name).then(
        (held) => {
          if (!held) run.abort();
        },
        () => run.abort(),
      );
    }, renewMs);
    try {
      await job.run(run.signal);
      if (!run.signal.aborted) this.runs.set(job.name, (this.runs.get(job.name) ?? 0) + 1);
    } finally {
      clearInterval(renewal);
      this.#abort.signal.removeEventListener('abort', stop);
    }
  }
}
