import type { RequestReply } from '../../core/bus/bus.ts';
import { BudgetLease, type LeaseObserver, type LeaseSettings } from './budget-lease.ts';

/** The leases of every budget this proxy has served, one each, made on first use. */
export class LeaseBook {
  readonly #leases = new Map<string, BudgetLease>();
  readonly #settings: LeaseSettings;
  readonly #requests: RequestReply;
  readonly #observer: LeaseObserver;
  readonly #firstWaitMs: number;

  constructor(settings: LeaseSettings, requests: RequestReply, observer: LeaseObserver, firstWaitMs: number) {
    this.#settings = settings;
    this.#requests = requests;
    this.#observer = observer;
    this.#firstWaitMs = firstWaitMs;
  }

  /**
   * The budget's lease. A budget never seen before asks for its first lease and waits for it
   * at most `firstWaitMs` (the one bounded wait of the hot path); a lease already held is
   * returned at once.
   */
  async lease(budgetId: string): Promise<BudgetLease> {
    const known = this.#leases.get(budgetId);
    if (known !== undefined) return known;
    const lease = new BudgetLease(budgetId, this.#settings, this.#requests, this.#observer);
    this.#leases.set(budgetId, lease);
    const first = lease.renew();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([first, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.#firstWaitMs)))]);
    clearTimeout(timer);
    lease.failOpenWhilePending();
    return lease;
  }

  /** Existing lease only, for readiness and tests. */
  peek(budgetId: string): BudgetLease | undefined {
    return this.#leases.get(budgetId);
  }

  async releaseAll(): Promise<void> {
    await Promise.all([...this.#leases.values()].map((l) => l.release()));
  }
}
