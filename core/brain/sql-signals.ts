import type { RE2JS } from 're2js';
import { lazyRegex } from './lazy-regex.ts';
import { finding, type Finding } from './finding.ts';
import type { TextView } from './text-view.ts';

const DELETE = lazyRegex(String.raw`\bdelete\s+(?:from\s+)?(?:only\s+)?[a-z_"\x60\[][\w."\x60\[\]]*`);
const UPDATE = lazyRegex(String.raw`\bupdate\s+(?:only\s+)?[a-z_"\x60\[][\w."\x60\[\]]*\s+set\s`);
const WHERE = lazyRegex(String.raw`\bwhere\b`);
/** Clauses after the condition: not part of it. */
const AFTER_CONDITION = /\b(?:returning|order\s+by|limit|group\s+by)\b/;
const VALUE = String.raw`('[^']*'|-?\d+(?:\.\d+)?|[a-z_][\w.]*)`;
const COMPARISON = new RegExp(String.raw`^${VALUE}\s*(=|==|<>|!=|<=|>=|<|>)\s*${VALUE}$`);

/**
 * A WHERE condition every row meets: one of its OR branches whose terms all hold whatever the
 * row holds (`1=1`, `2=2`, `id=5 OR 1=1`, `true`, `NOT false`, `'a'='a'`, `id > 0`,
 * `x IS NOT NULL`, `name LIKE '%'`).
 */
function selectsEverything(condition: string): boolean {
  const cut = AFTER_CONDITION.exec(condition);
  const own = cut === null ? condition : condition.slice(0, cut.index);
  return own.split(/\bor\b/).some((branch) => branch.split(/\band\b/).every(alwaysTrue));
}

function alwaysTrue(term: string): boolean {
  const t = unwrapped(term);
  if (/^(?:true|not\s+(?:false|0)|[1-9]\d*)$/.test(t)) return true;
  if (/^[\w.]+\s+is\s+not\s+null$|^[\w.]+\s+i?like\s+'%+'$/.test(t)) return true;
  const m = COMPARISON.exec(t);
  if (m === null) return false;
  const [, left = '', op = '', right = ''] = m;
  const number = (v: string) => (/^-?\d/.test(v) ? Number(v) : undefined);
  const [a, b] = [number(left), number(right)];
  if (a !== undefined && b !== undefined) return compare(a, op, b);
  if (left.startsWith("'") && right.startsWith("'")) return compare(left < right ? -1 : left > right ? 1 : 0, op, 0);
  if (left === right) return op !== '<>' && op !== '!=' && op !== '<' && op !== '>';
  // Ids are positive: `id > 0`, `id >= 1` or `id <> -1` is every row.
  return (
    /^(?:\w+\.)?id$/.test(left) &&
    b !== undefined &&
    (op === '>=' ? b <= 1 : (op === '>' || op === '<>' || op === '!=') && b < 1)
  );
}

/** The term without the spaces and parentheses around it; a loop, where a trimming regex would backtrack. */
function unwrapped(term: string): string {
  let from = 0;
  let to = term.length;
  while (from < to && /[\s(]/.test(term[from] as string)) from++;
  while (to > from && /[\s);]/.test(term[to - 1] as string)) to--;
  return term.slice(from, to);
}

function compare(a: number, op: string, b: number): boolean {
  switch (op) {
    case '=':
    case '==':
      return a === b;
    case '<>':
    case '!=':
      return a !== b;
    case '<':
      return a < b;
    case '>':
      return a > b;
    case '<=':
      return a <= b;
    default:
      return a >= b;
  }
}

/**
 * Statements that remove or overwrite every row: DELETE or UPDATE without WHERE, or with one
 * that selects everything. A DELETE with a real WHERE is routine and recorded below the default
 * threshold. DROP and TRUNCATE are patterns (patterns.ts).
 */
export function scanSql(view: TextView, out: Finding[], quotedData: (index: number) => boolean): void {
  const text = view.norm;
  if (!text.includes('delete') && !text.includes('update')) return;
  let offset = 0;
  for (const statement of text.split(';')) {
    check(statement, offset, DELETE(), 'delete');
    check(statement, offset, UPDATE(), 'update');
    offset += statement.length + 1;
  }

  function check(statement: string, base: number, verb: RE2JS, kind: 'delete' | 'update'): void {
    if (!statement.includes(kind)) return;
    const m = verb.matcher(statement);
    if (!m.find()) return;
    // `delete` as a word in prose ("delete the file") is not SQL: require FROM, or a following SET for UPDATE.
    if (kind === 'delete' && !/^delete\s+from\b/.test(statement.slice(m.start(), m.start() + 40))) return;
    const rest = statement.slice(m.start());
    const start = base + m.start();
    if (quotedData(start)) return;
    const end = base + statement.length;
    const where = WHERE().matcher(rest);
    if (!where.find()) {
      out.push(finding(view, 'DESTRUCTIVE', kind === 'delete' ? 0.9 : 0.75, `sql.${kind}_without_where`, start, end));
    } else if (selectsEverything(rest.slice(where.end()))) {
      out.push(finding(view, 'DESTRUCTIVE', kind === 'delete' ? 0.85 : 0.7, `sql.${kind}_all_rows`, start, end));
    } else if (kind === 'delete') {
      out.push(finding(view, 'DESTRUCTIVE', 0.25, 'sql.delete_where', start, end));
    }
  }
}
