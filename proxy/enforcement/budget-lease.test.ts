import { describe, expect, it } from 'vitest';
import type { RequestReply } from '../../core/bus/bus.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { LeaseRequest } from '../../core/sync/contract.ts';
import { BudgetLease, isRefusal, type LeaseSettings, type Reservation } from './budget-lease.ts';

const PICO = 1_000_000; // per micro-dollar
const settings: LeaseSettings = {
  tenantId: 't',
  holder: 'h',
  want: { tokens: 1000, pico: 1000 * PICO },
  softLimit: { tokens: 50, pico: 50 * PICO },
  renewBelow: 0.5,
  timeoutMs: 100,
};
const observer = { outcome: () => undefined, warn: () => undefined };

/** A lease responder granting up to `left` micro-dollars (tokens unlimited), recording each request. */
function responder(
  left: { micros: number },
  fail?: () => Error | undefined,
  extra: Record<string, unknown> = {},
): RequestReply & { seen: LeaseRequest[] } {
  const seen: LeaseRequest[] = [];
  return {
    seen,
    request(_subject, data) {
      const req = data as LeaseRequest;
      seen.push(req);
      const error = fail?.();
      if (error !== undefined) return Promise.reject(error);
      left.micros -= req.spent_micros;
      return Promise.resolve({
        lease_id: 'L1',
        budget_id: req.budget_id,
        tokens: null,
        micros: Math.min(req.want_micros, left.micros),
        expires_at: new Date(Date.now() + 60_000).toISOString(),
        status: 'active',
        ...extra,
      });
    },
    reply: () => Promise.reject(new Error('not used')),
  };
}

describe('BudgetLease', () => {
  it('reserves from the grant, settles actual usage, and reports what was spent on renewal', async () => {
    const rr = responder({ micros: 10_000 });
    const lease = new BudgetLease('b', settings, rr, observer);
    await lease.renew();
    expect(lease.available()).toEqual({ tokens: null, pico: 1000 * PICO });
    const held = lease.reserve({ tokens: 100, pico: 300 * PICO }, { tokens: 10, pico: 10 * PICO }) as Reservation;
    expect(lease.available().pico).toBe(700 * PICO);
    held.settle({ tokens: 80, pico: 600 * PICO + 5 });
    expect(lease.available().pico).toBe(400 * PICO - 5);
    await lease.renew();
    // Whole micro-dollars are reported; the 5 pico-dollar remainder waits for the next report
    // and counts against the new grant meanwhile.
    expect(rr.seen.at(-1)).toMatchObject({ spent_micros: 600, spent_tokens: 80, lease_id: 'L1', report_seq: 1 });
    expect(lease.available().pico).toBe(1000 * PICO - 5);
  });

  it('sends a report whose answer was lost again unchanged, and what was spent since in the next one', async () => {
    let lose = false;
    const rr = responder({ micros: 1_000_000 }, () => (lose ? new SvcError('SVC-SYS-9001', 'timed out') : undefined));
    const lease = new BudgetLease('b', settings, rr, observer);
    await lease.renew();
    expect(rr.seen[0]).toMatchObject({ spent_tokens: 0, spent_micros: 0, report_seq: null });
    const spend = (tokens: number, micros: number) =>
      (lease.reserve({ tokens, pico: micros * PICO }, { tokens: 1, pico: 1 }) as Reservation).settle({
        tokens,
        pico: micros * PICO,
      });

    spend(30, 300);
    lose = true;
    await lease.renew();
    spend(20, 200);
    await lease.renew();
    lose = false;
    await lease.renew();
    // Two lost answers and the one that came: the same report each time.
    expect(rr.seen.length).toBeGreaterThanOrEqual(4);
    for (const request of rr.seen.slice(1)) {
      expect(request).toMatchObject({ lease_id: 'L1', spent_tokens: 30, spent_micros: 300, report_seq: 1 });
    }
    // The answer leaves out the later spend, which counts against the grant until reported.
    expect(lease.available().pico).toBe(1000 * PICO - 200 * PICO);

    const answered = rr.seen.length;
    await lease.renew();
    expect(rr.seen[answered]).toMatchObject({ spent_tokens: 20, spent_micros: 200, report_seq: 2 });
    expect(lease.available().pico).toBe(1000 * PICO);
    await lease.renew();
    expect(rr.seen[answered + 1]).toMatchObject({ spent_tokens: 0, spent_micros: 0, report_seq: null });
    await lease.release();
  });

  it('on release sends the unanswered report as it was, then what was spent after it', async () => {
    let lose = false;
    const rr = responder({ micros: 1_000_000 }, () => (lose ? new SvcError('SVC-SYS-9001', 'timed out') : undefined));
    const lease = new BudgetLease('b', settings, rr, observer);
    await lease.renew();
    const spend = (micros: number) =>
      (lease.reserve({ tokens: 1, pico: micros * PICO }, { tokens: 1, pico: 1 }) as Reservation).settle({
        tokens: 1,
        pico: micros * PICO,
      });
    spend(300);
    lose = true;
    await lease.renew();
    spend(200);
    lose = false;
    const before = rr.seen.length;
    await lease.release();
    expect(rr.seen.slice(before)).toMatchObject([
      { release: true, spent_tokens: 1, spent_micros: 300, report_seq: 1 },
      { release: true, spent_tokens: 1, spent_micros: 200, report_seq: 2 },
    ]);
  });

  it("holds what is left when it covers the minimum, refuses below it, and lets an answer's hold grow only while the lease can pay", async () => {
    const lease = new BudgetLease('b', settings, responder({ micros: 100 }), observer);
    await lease.renew();
    const first = lease.reserve({ tokens: 10, pico: 500 * PICO }, { tokens: 1, pico: 10 * PICO }) as Reservation;
    expect(first.held.pico).toBe(100 * PICO);
    const refused = lease.reserve({ tokens: 10, pico: 5 * PICO }, { tokens: 1, pico: 1 });
    expect(isRefusal(refused) && refused.code).toBe('SVC-BUD-3001');
    expect(first.cover({ tokens: 0, pico: 100 * PICO + 1 })).toBe(false);
    // What the hold already covers needs nothing of the lease.
    expect(first.cover({ tokens: 10, pico: 100 * PICO })).toBe(true);
    first.settle({ tokens: 5, pico: 40 * PICO });
    const second = lease.reserve({ tokens: 1, pico: 20 * PICO }, { tokens: 1, pico: 20 * PICO }) as Reservation;
    expect(second.cover({ tokens: 0, pico: 60 * PICO })).toBe(true);
    expect(second.held.pico).toBe(60 * PICO);
    expect(second.cover({ tokens: 0, pico: 60 * PICO + 1 })).toBe(false);
  });

  it('fails open on the soft limit when the control plane cannot be reached', async () => {
    const lease = new BudgetLease(
      'b',
      settings,
      responder({ micros: 0 }, () => new SvcError('SVC-SYS-9001', 'no responder')),
      observer,
    );
    await lease.renew();
    expect(lease.mode).toBe('soft');
    expect(lease.available()).toEqual({ tokens: 50, pico: 50 * PICO });
    expect(isRefusal(lease.reserve({ tokens: 10, pico: 10 * PICO }, { tokens: 10, pico: 10 * PICO }))).toBe(false);
    await lease.release();
  });

  it('spends a grant no longer once its time to live is over: only the soft limit, less what it spent since', async () => {
    let clock = 1_000_000;
    let away = false;
    // The control plane's clock runs an hour ahead: its expires_at would read as an hour to go.
    const rr = responder({ micros: 10_000 }, () => (away ? new SvcError('SVC-SYS-9001', 'no responder') : undefined), {
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      ttl_ms: 5_000,
    });
    const lease = new BudgetLease('b', settings, rr, observer, () => clock);
    await lease.renew();
    (lease.reserve({ tokens: 1, pico: 30 * PICO }, { tokens: 1, pico: 1 }) as Reservation).settle({
      tokens: 1,
      pico: 30 * PICO,
    });
    away = true;
    await lease.renew();
    // Cut off, it still spends the grant the control plane counts, and the soft limit beside it.
    expect(lease.mode).toBe('soft');
    clock += 4_999;
    expect(lease.available().pico).toBe((1000 + 50 - 30) * PICO);
    // Five seconds after it asked, the grant counts at the control plane no more.
    clock += 1;
    expect(lease.available().pico).toBe((50 - 30) * PICO);
    expect(isRefusal(lease.reserve({ tokens: 1, pico: 40 * PICO }, { tokens: 1, pico: 21 * PICO }))).toBe(true);
    expect(isRefusal(lease.reserve({ tokens: 1, pico: 20 * PICO }, { tokens: 1, pico: 20 * PICO }))).toBe(false);
    // The renewal those reservations started was asked while still cut off.
    await lease.renew();
    // Back in touch, the spend is reported and a new grant counts again.
    away = false;
    await lease.renew();
    expect(lease.mode).toBe('granted');
    expect(lease.available().pico).toBeGreaterThan(900 * PICO);
  });

  it("refuses with the control plane's own code when it answers that the budget cannot be leased", async () => {
    const lease = new BudgetLease(
      'b',
      settings,
      responder({ micros: 0 }, () => new SvcError('SVC-BUD-3002', 'budget b not found')),
      observer,
    );
    await lease.renew();
    const refusal = lease.reserve({ tokens: 1, pico: 1 }, { tokens: 1, pico: 1 });
    expect(isRefusal(refusal) && refusal.code).toBe('SVC-BUD-3002');
  });

  it('follows the published budget status: exhausted refuses at once, active again renews', async () => {
    const rr = responder({ micros: 1000 });
    const lease = new BudgetLease('b', settings, rr, observer);
    await lease.renew();
    lease.applyStatus('exhausted');
    const refusal = lease.reserve({ tokens: 1, pico: 1 }, { tokens: 1, pico: 1 });
    expect(isRefusal(refusal) && refusal.code).toBe('SVC-BUD-3001');
    lease.applyStatus('active');
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(lease.mode).toBe('granted');
    expect(isRefusal(lease.reserve({ tokens: 1, pico: 1 }, { tokens: 1, pico: 1 }))).toBe(false);
  });
});
