import { describe, expect, it } from 'vitest';
import { backtest } from '../bench/oracle-backtest.ts';

describe('the Oracle on its backtest', () => {
  it('warns of every overrun hours ahead and rarely of a day that stays under', { timeout: 60_000 }, () => {
    const rows = new Map(backtest(0.8, 4, true).map((r) => [r.name, r.figures]));
    const all = rows.get('all workloads');
    expect(all?.recall).toBe(1);
    expect(all?.precision).toBeGreaterThanOrEqual(0.8);
    expect(rows.get('steady, 70 %')?.warnedDays).toBe(0);
    expect(rows.get('accelerating, 160 %')?.leadHoursMin).toBeGreaterThan(4);
    expect(rows.get('steady, 130 %')?.leadHoursMin).toBeGreaterThan(4);
    expect(all?.brier).toBeLessThan(0.25);
  });
});
