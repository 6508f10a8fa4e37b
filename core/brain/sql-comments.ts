import { sqlLiterals } from './finding.ts';
import type { TextView } from './text-view.ts';

/**
 * The view with its SQL comments (`-- …` to the end of the line, `/* … *\/`) blanked out character
 * for character, so `DROP/**\/TABLE` reads `DROP    TABLE`, `DELETE FROM users -- WHERE id = 5` has
 * no WHERE, and evidence keeps its offsets. Value literals (`note = '--'`) are kept. The view itself
 * when it holds no comment.
 */
export function withoutSqlComments(view: TextView): TextView {
  const text = view.norm;
  if (!text.includes('--') && !text.includes('/*')) return view;
  const literals = sqlLiterals(text);
  let next = 0;
  let out = '';
  let kept = 0;
  let i = 0;
  while (i < text.length) {
    while (next < literals.length && (literals[next] as [number, number])[1] < i) next++;
    const literal = literals[next];
    if (literal !== undefined && literal[0] === i) {
      i = literal[1] + 1;
      continue;
    }
    const line = text.startsWith('--', i);
    if (!line && !text.startsWith('/*', i)) {
      i++;
      continue;
    }
    const close = line ? text.indexOf('\n', i) : text.indexOf('*/', i + 2);
    const end = close < 0 ? text.length : line ? close : close + 2;
    out += text.slice(kept, i) + text.slice(i, end).replace(/[^\n]/g, ' ');
    kept = i = end;
  }
  return { ...view, norm: out + text.slice(kept) };
}
