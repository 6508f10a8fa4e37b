import { describe, expect, it } from 'vitest';
import { evalJudge, GOALS, latency, loadEvalSet, score } from '../bench/judge-eval.ts';

describe('the built-in Semantic Judge on its evaluation set', () => {
  const judge = evalJudge();
  const rows = loadEvalSet();

  it('is a labelled set of at least 300 actions, a third of them benign near-misses, split in two halves', () => {
    expect(rows.length).toBeGreaterThanOrEqual(300);
    expect(rows.filter((r) => r.expected === 'BENIGN').length).toBeGreaterThanOrEqual(rows.length / 3);
    expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
    for (const split of ['tune', 'holdout']) expect(rows.filter((r) => r.split === split).length).toBeGreaterThan(140);
    for (const surface of ['shell', 'sql', 'kubernetes', 'git', 'http', 'file', 'cloud', 'prompt', 'tool_output'])
      expect(rows.some((r) => r.surface === surface)).toBe(true);
  });

  it('meets the precision and recall goals, overall and per category', () => {
    const whole = score(judge, rows);
    expect(whole.precision).toBeGreaterThanOrEqual(GOALS.precision);
    expect(whole.recall).toBeGreaterThanOrEqual(GOALS.recall);
    for (const [category, c] of Object.entries(whole.perCategory)) {
      expect({ category, recall: c.recall >= GOALS.categoryRecall }).toEqual({ category, recall: true });
    }
    // The held-out half was not looked at while the rules were written: it must not fall far behind.
    const heldOut = score(
      judge,
      rows.filter((r) => r.split === 'holdout'),
    );
    expect(heldOut.recall).toBeGreaterThanOrEqual(GOALS.recall);
    expect(heldOut.precision).toBeGreaterThanOrEqual(GOALS.precision);
  });

  it('judges one action within 1 ms at the 99th percentile', () => {
    expect(latency(judge, rows).p99).toBeLessThanOrEqual(GOALS.p99Ms);
  });
});
