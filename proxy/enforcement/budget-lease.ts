import { isSvcError, type SvcCode } from '../../core/errors/index.ts';
import { LeaseGrantSchema, syncSubjects, type LeaseGrant } from '../../core/sync/contract.ts';
import type { RequestReply } from '../../core/bus/bus.ts';
import type { BudgetStatus } from '../../core/domain/budget.ts';
import { covers, microsToPico, PICO_PER_MICRO, type Allowance, type Amount } from './amounts.ts';

export interface LeaseSettings {
  tenantId: string;
  holder: string;
  /** Asked for per request. */
  want: Amount;
  /** Granted locally when the control plane cannot be reached (fail open, bounded). */
  softLimit: Amount;
  /** Renew once less than this fraction of the grant is left. */
  renewBelow: number;
  timeoutMs: number;
}

export interface LeaseObserver {
  outcome(outcome: 'granted' | 'refused' | 'unreachable'): void;
  warn(object: Record<string, unknown>, message: string): void;
}

/** Why a budget cannot pay for a call. */
export interface LeaseRefusal {
  code: SvcCode;
  message: string;
  available: Allowance;
}

/** What one call holds of the lease until it settles. */
export interface Reservation {
  readonly budgetId: string;
  readonly held: Amount;
  /**
   * Holds at least `total` for a call whose answer outgrew its reservation, taking what the hold
   * lacks from the lease; false when the lease cannot.
   */
  cover(total: Amount): boolean;
  /** Releases the hold and records what the call really used (it may exceed the hold). */
  settle(used: Amount): void;
}

export type LeaseMode = 'pending' | 'granted' | 'soft' | 'refused';

/**
 * One budget's lease held by this proxy. Calls reserve from it synchronously, never waiting on
 * the control plane; renewals (reporting what was spent, asking for a new whole lease) run in
 * the background once the grant runs low or nears expiry. All sums are integers: tokens and
 * pico-dollars (the grant comes in micro-dollars).
 *
 * A grant not renewed within its time to live is spent no more: the control plane has stopped
 * counting it and may have leased it to other proxies. What is left then is the soft limit, less
 * what this proxy spent since its last grant (which the control plane has not counted either).
 */
export class BudgetLease {
  readonly budgetId: string;
  readonly #settings: LeaseSettings;
  readonly #requests: RequestReply;
  readonly #observer: LeaseObserver;
  #mode: LeaseMode = 'pending';
  #refusal: { code: SvcCode; message: string } | null = null;
  #leaseId: string | null = null;
  #grant: Allowance = { tokens: 0, pico: 0 };
  /** When the grant stops counting at the control plane, on this proxy's clock; null before one. */
  #expiresAt: number | null = null;
  /** Settled against the current grant. */
  #consumed: Amount = { tokens: 0, pico: 0 };
  #reserved: Amount = { tokens: 0, pico: 0 };
  /** Settled and not yet in a report to the control plane. */
  #unreported: Amount = { tokens: 0, pico: 0 };
  /** The report sent and not yet answered: sent again, unchanged, until an answer comes. */
  #report: Report | null = null;
  #lastReportSeq = 0;
  #renewal: Promise<void> | null = null;
  #expiryTimer: NodeJS.Timeout | undefined;
  #closed = false;

  readonly #now: () => number;

  constructor(
    budgetId: string,
    settings: LeaseSettings,
    requests: RequestReply,
    observer: LeaseObserver,
    now: () => number = Date.now,
  ) {
    this.budgetId = budgetId;
    this.#settings = settings;
    this.#requests = requests;
    this.#observer = observer;
    this.#now = now;
  }

  get mode(): LeaseMode {
    return this.#mode;
  }

  /** What can still be reserved; null per unlimited dimension. */
  available(): Allowance {
    const grant = this.#spendable();
    return {
      tokens: grant.tokens === null ? null : grant.tokens - this.#consumed.tokens - this.#reserved.tokens,
      pico: grant.pico === null ? null : grant.pico - this.#consumed.pico - this.#reserved.pico,
    };
  }

  /** The grant, or past its time to live only the soft limit (an unlimited dimension stays so). */
  #spendable(): Allowance {
    if (this.#expiresAt === null || this.#now() < this.#expiresAt) return this.#grant;
    const { softLimit } = this.#settings;
    return {
      tokens: this.#grant.tokens === null ? null : softLimit.tokens,
      pico: this.#grant.pico === null ? null : softLimit.pico,
    };
  }

  /** Asks for (or renews) the lease now; resolves when the answer, or its failure, is applied. */
  renew(): Promise<void> {
    this.#renewal ??= this.#request(false)
      .then(() => undefined)
      .finally(() => {
        this.#renewal = null;
      });
    return this.#renewal;
  }

  /**
   * Holds `estimate` (or as much of it as the lease has, when that still covers `minimum`) for
   * one call. Refuses when the lease cannot cover `minimum`.
   */
  reserve(estimate: Amount, minimum: Amount): Reservation | LeaseRefusal {
    if (this.#mode === 'refused' && this.#refusal !== null) return { ...this.#refusal, available: this.available() };
    const available = this.available();
    if (!covers(available, minimum) || isEmpty(available)) {
      this.#maybeRenew();
      return {
        code: 'SVC-BUD-3001',
        message: `budget ${this.budgetId} exhausted: the lease cannot cover this call`,
        available,
      };
    }
    const held: Amount = {
      tokens: capped(estimate.tokens, available.tokens),
      pico: capped(estimate.pico, available.pico),
    };
    this.#add(this.#reserved, held, 1);
    this.#maybeRenew();
    let settled = false;
    return {
      budgetId: this.budgetId,
      held,
      cover: (total) => {
        // A stream asks at every event, and the hold nearly always covers it: that answer allocates nothing.
        if (total.tokens <= held.tokens && total.pico <= held.pico) return true;
        const more = { tokens: Math.max(0, total.tokens - held.tokens), pico: Math.max(0, total.pico - held.pico) };
        if (settled || this.#mode === 'refused' || !covers(this.available(), more)) {
          this.#maybeRenew();
          return false;
        }
        this.#add(this.#reserved, more, 1);
        held.tokens += more.tokens;
        held.pico += more.pico;
        this.#maybeRenew();
        return true;
      },
      settle: (used) => {
        if (settled) return;
        settled = true;
        this.#add(this.#reserved, held, -1);
        this.#add(this.#consumed, used, 1);
        this.#add(this.#unreported, used, 1);
        this.#maybeRenew();
      },
    };
  }

  /**
   * The control plane published the budget's status: a budget no longer active is refused at
   * once; one active again (new period, raised limit) is asked for a fresh lease.
   */
  applyStatus(status: BudgetStatus): void {
    if (status !== 'active') {
      this.#mode = 'refused';
      this.#refusal = {
        code: status === 'expired' ? 'SVC-BUD-3003' : 'SVC-BUD-3001',
        message: `budget ${this.budgetId} is ${status}`,
      };
    } else if (this.#mode === 'refused') {
      void this.renew();
    }
  }

  /** The first grant did not arrive in time: serve from the soft limit until it does. */
  failOpenWhilePending(): void {
    if (this.#mode === 'pending') this.#applySoftLimit('first lease not granted in time');
  }

  /**
   * Returns what is left to the control plane (shutdown), with what was spent; a report still
   * unanswered goes first, as it was, and the rest after it. Failures are only logged.
   */
  async release(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#expiryTimer);
    await this.#renewal;
    if (this.#leaseId === null) return;
    if ((await this.#request(true)) && this.#nextReport() !== null) await this.#request(true);
  }

  #maybeRenew(): void {
    if (this.#closed || this.#renewal !== null || this.#mode === 'pending') return;
    const available = this.available();
    const low = (have: number | null, grant: number | null, want: number) =>
      have !== null && have < Math.max(grant ?? 0, want) * this.#settings.renewBelow;
    const { want } = this.#settings;
    if (
      low(available.tokens, this.#grant.tokens, want.tokens) ||
      low(available.pico, this.#grant.pico, want.pico) ||
      this.#mode !== 'granted'
    )
      void this.renew();
  }

  /** The whole micro-dollars and tokens not yet reported, as the next report; null when none. */
  #nextReport(): Report | null {
    const micros = Math.floor(this.#unreported.pico / PICO_PER_MICRO);
    if (micros === 0 && this.#unreported.tokens === 0) return null;
    return { seq: this.#lastReportSeq + 1, tokens: this.#unreported.tokens, micros };
  }

  /** Sends a renewal (or the release) with the pending report, or a new one; true once answered. */
  async #request(release: boolean): Promise<boolean> {
    const { tenantId, holder, want, timeoutMs } = this.#settings;
    if (this.#report === null) {
      this.#report = this.#nextReport();
      if (this.#report !== null) {
        this.#lastReportSeq = this.#report.seq;
        this.#add(this.#unreported, { tokens: this.#report.tokens, pico: this.#report.micros * PICO_PER_MICRO }, -1);
      }
    }
    const report = this.#report;
    const askedAt = this.#now();
    let grant: LeaseGrant;
    try {
      const reply = await this.#requests.request(
        syncSubjects.lease(tenantId),
        {
          tenant_id: tenantId,
          budget_id: this.budgetId,
          holder,
          lease_id: this.#leaseId,
          want_tokens: release ? 0 : want.tokens,
          want_micros: release ? 0 : Math.ceil(want.pico / PICO_PER_MICRO),
          spent_tokens: report?.tokens ?? 0,
          spent_micros: report?.micros ?? 0,
          report_seq: report?.seq ?? null,
          release,
        },
        timeoutMs,
      );
      grant = LeaseGrantSchema.parse(reply);
    } catch (error) {
      // The control plane may have counted the report all the same: it is sent again as it is.
      this.#failed(error);
      return false;
    }
    this.#report = null;
    if (release) return true;
    this.#leaseId = grant.lease_id;
    this.#grant = { tokens: grant.tokens, pico: microsToPico(grant.micros) };
    // The grant is what is left after every answered report: spend in none counts against it.
    this.#consumed = { ...this.#unreported };
    if (grant.status !== 'active') {
      this.applyStatus(grant.status);
    } else {
      this.#mode = 'granted';
      this.#refusal = null;
    }
    this.#observer.outcome('granted');
    // Counted from the question, the deadline falls no later than the control plane's own.
    this.#expiresAt = grant.ttl_ms === undefined ? Date.parse(grant.expires_at) : askedAt + grant.ttl_ms;
    this.#scheduleExpiry();
    return true;
  }

  #failed(error: unknown): void {
    const code = isSvcError(error) ? error.code : 'SVC-SYS-9001';
    const message = error instanceof Error ? error.message : String(error);
    if (isSvcError(error) && !error.spec.retryable) {
      // The control plane answered: this budget cannot be leased (exhausted, unknown, expired).
      this.#observer.outcome('refused');
      this.#mode = 'refused';
      this.#refusal = {
        code: code.startsWith('SVC-BUD-') ? code : 'SVC-BUD-3001',
        message: `budget ${this.budgetId}: ${message}`,
      };
      return;
    }
    this.#observer.outcome('unreachable');
    if (this.#mode !== 'soft' && this.#mode !== 'refused') this.#applySoftLimit(message);
    this.#scheduleRetry();
  }

  /** Fail open, once per outage: the soft limit is added to whatever the last grant left. */
  #applySoftLimit(reason: string): void {
    const { softLimit } = this.#settings;
    this.#grant = {
      tokens: this.#grant.tokens === null ? null : this.#grant.tokens + softLimit.tokens,
      pico: this.#grant.pico === null ? null : this.#grant.pico + softLimit.pico,
    };
    this.#mode = 'soft';
    this.#observer.warn(
      { budget_id: this.budgetId, reason },
      'control plane unreachable; budget runs on the soft limit',
    );
  }

  #scheduleRetry(): void {
    if (this.#closed) return;
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = setTimeout(() => void this.renew(), Math.max(250, this.#settings.timeoutMs));
    this.#expiryTimer.unref();
  }

  #scheduleExpiry(): void {
    if (this.#closed || this.#expiresAt === null) return;
    clearTimeout(this.#expiryTimer);
    const ttl = this.#expiresAt - this.#now();
    this.#expiryTimer = setTimeout(() => void this.renew(), Math.max(250, ttl * 0.8));
    this.#expiryTimer.unref();
  }

  #add(target: Amount, amount: Amount, sign: 1 | -1): void {
    target.tokens += sign * amount.tokens;
    target.pico += sign * amount.pico;
  }
}

/** Spend reported in one renewal, numbered per holder and budget: one sent again counts once. */
interface Report {
  seq: number;
  tokens: number;
  micros: number;
}

function capped(want: number, have: number | null): number {
  return have === null ? want : Math.max(0, Math.min(want, have));
}

function isEmpty(available: Allowance): boolean {
  return (available.tokens !== null && available.tokens <= 0) || (available.pico !== null && available.pico <= 0);
}

export function isRefusal(value: Reservation | LeaseRefusal): value is LeaseRefusal {
  return 'code' in value;
}
