import type { BudgetPeriod } from './budget.ts';

export interface PeriodBounds {
  start: Date;
  /** null for the `total` period, which never rolls over. */
  end: Date | null;
}

/**
 * Calendar periods in UTC: an hourly budget runs from the top of the hour, a weekly one from
 * Monday 00:00, a monthly one from the 1st, a quarterly one from January, April, July or October
 * 1st. `total` starts when the budget was created.
 */
export function periodBounds(period: BudgetPeriod, at: Date, createdAt: Date): PeriodBounds {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const d = at.getUTCDate();
  switch (period) {
    case 'hourly': {
      const start = new Date(Date.UTC(y, m, d, at.getUTCHours()));
      return { start, end: new Date(start.getTime() + 3_600_000) };
    }
    case 'daily': {
      const start = new Date(Date.UTC(y, m, d));
      return { start, end: new Date(Date.UTC(y, m, d + 1)) };
    }
    case 'weekly': {
      const sinceMonday = (at.getUTCDay() + 6) % 7;
      const start = new Date(Date.UTC(y, m, d - sinceMonday));
      return { start, end: new Date(Date.UTC(y, m, d - sinceMonday + 7)) };
    }
    case 'monthly':
      return { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
    case 'quarterly': {
      const first = m - (m % 3);
      return { start: new Date(Date.UTC(y, first, 1)), end: new Date(Date.UTC(y, first + 3, 1)) };
    }
    case 'total':
      return { start: createdAt, end: null };
  }
}
