/**
 * The Semantic Judge against its labelled evaluation set (test/brain/judge-eval-set.jsonl):
 * precision and recall per category and overall, for the tuning half, the held-out half and
 * both, and the latency of one judgement.
 *
 *   node test/bench/judge-eval.ts [--errors]   (--errors lists the tuning half's misses only)
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createBuiltinJudge, type BuiltinJudge } from '../../core/brain/index.ts';
import { INTENT_CATEGORIES } from '../../core/policy/index.ts';

export interface EvalRow {
  id: string;
  surface: string;
  tool_name: string;
  tool_args: string;
  text: string;
  expected: string;
  split: 'tune' | 'holdout';
}

export interface Scores {
  rows: number;
  precision: number;
  recall: number;
  perCategory: Record<string, { precision: number; recall: number; support: number }>;
  misses: { id: string; expected: string; predicted: string }[];
}

export const GOALS = { precision: 0.95, recall: 0.9, categoryRecall: 0.8, p99Ms: 1 };
const THRESHOLD = 0.5;

export function loadEvalSet(): EvalRow[] {
  const path = fileURLToPath(new URL('../brain/judge-eval-set.jsonl', import.meta.url));
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as EvalRow);
}

function inputOf(row: EvalRow) {
  const context: Record<string, unknown> = {};
  if (row.tool_name !== '') context.tool_name = row.tool_name;
  if (row.tool_args !== '') context.tool_args = row.tool_args;
  return { text: row.text, intent: 'any harmful intent', field: 'text', context };
}

/** The category the judge gives an action at the default min_confidence, or BENIGN. */
export function predict(judge: BuiltinJudge, row: EvalRow): string {
  const top = judge.classify(inputOf(row)).categories[0];
  return top !== undefined && top.confidence >= THRESHOLD ? top.category : 'BENIGN';
}

export function score(judge: BuiltinJudge, rows: readonly EvalRow[]): Scores {
  const perCategory: Scores['perCategory'] = {};
  const misses: Scores['misses'] = [];
  let truePositive = 0;
  let predictedPositive = 0;
  let actualPositive = 0;
  const counts = new Map<string, { tp: number; predicted: number; actual: number }>();
  for (const c of INTENT_CATEGORIES) counts.set(c, { tp: 0, predicted: 0, actual: 0 });
  for (const row of rows) {
    const predicted = predict(judge, row);
    if (predicted !== row.expected) misses.push({ id: row.id, expected: row.expected, predicted });
    if (predicted !== 'BENIGN') {
      predictedPositive++;
      (counts.get(predicted) as { predicted: number }).predicted++;
    }
    if (row.expected !== 'BENIGN') {
      actualPositive++;
      (counts.get(row.expected) as { actual: number }).actual++;
      if (predicted === row.expected) {
        truePositive++;
        (counts.get(row.expected) as { tp: number }).tp++;
      }
    }
  }
  for (const [category, c] of counts)
    perCategory[category] = {
      precision: c.predicted === 0 ? 1 : c.tp / c.predicted,
      recall: c.actual === 0 ? 1 : c.tp / c.actual,
      support: c.actual,
    };
  return {
    rows: rows.length,
    precision: predictedPositive === 0 ? 1 : truePositive / predictedPositive,
    recall: actualPositive === 0 ? 1 : truePositive / actualPositive,
    perCategory,
    misses,
  };
}

/**
 * Latency of one judgement (`judgeNow`, as the proxy calls it), after a warm-up: each action is
 * judged `rounds` times and its median taken, so a pause of a shared machine (another process
 * on the core, a garbage collection) does not count as the judge's; p50/p99 are over actions.
 */
export function latency(judge: BuiltinJudge, rows: readonly EvalRow[], rounds = 15): { p50: number; p99: number } {
  const input = (row: EvalRow) => ({ ...inputOf(row), intent: 'DESTRUCTIVE' });
  for (let i = 0; i < 5; i++) for (const row of rows) judge.judgeNow(input(row));
  const medians = rows.map((row) => {
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const started = performance.now();
      judge.judgeNow(input(row));
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)] as number;
  });
  medians.sort((a, b) => a - b);
  const at = (q: number) => medians[Math.min(medians.length - 1, Math.floor(q * medians.length))] as number;
  return { p50: at(0.5), p99: at(0.99) };
}

export function evalJudge(): BuiltinJudge {
  return createBuiltinJudge({ maxTextChars: 65_536, allowedHosts: [] });
}

function print(name: string, s: Scores): void {
  console.log(`${name}: ${s.rows} actions, precision ${s.precision.toFixed(3)}, recall ${s.recall.toFixed(3)}`);
  for (const [category, c] of Object.entries(s.perCategory))
    console.log(
      `  ${category.padEnd(18)} precision ${c.precision.toFixed(3)}  recall ${c.recall.toFixed(3)}  (${c.support})`,
    );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const judge = evalJudge();
  const rows = loadEvalSet();
  const tune = score(
    judge,
    rows.filter((r) => r.split === 'tune'),
  );
  print('tuning half', tune);
  print(
    'held-out half',
    score(
      judge,
      rows.filter((r) => r.split === 'holdout'),
    ),
  );
  print('whole set', score(judge, rows));
  const { p50, p99 } = latency(judge, rows);
  console.log(`latency per judgement: p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms`);
  if (process.argv.includes('--errors'))
    for (const m of tune.misses) console.log(`  miss ${m.id}: expected ${m.expected}, got ${m.predicted}`);
}
