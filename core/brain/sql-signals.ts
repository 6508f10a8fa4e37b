import type { RE2JS } from 're2js';
import { lazyRegex } from './lazy-regex.ts';
import { finding, type Finding } from './finding.ts';
import type { TextView } from './text-view.ts';

const DELETE = lazyRegex(String.raw`\bdelete\s+(?:from\s+)?(?:only\s+)?[a-z_"\x60\[][\w."\x60\[\]]*`);
const UPDATE = lazyRegex(String.raw`\bupdate\s+(?:only\s+)?[a-z_"\x60\[][\w."\x60\[\]]*\s+set\s`);
const WHERE = lazyRegex(String.raw`\bwhere\b`);
/** A WHERE that selects every row: `1=1`, `true`, `id > 0`, `x is not null`, `'a'='a'`. */
const TAUTOLOGY = lazyRegex(
  String.raw`\bwhere\s+(?:\(?\s*)?(?:1\s*=\s*1|true|1\b|'(\w*)'\s*=\s*'\w*'|(?:\w+\.)?id\s*(?:>|>=)\s*0\b|\w+\s+is\s+not\s+null\s*(?:;|$))`,
);

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
    if (!WHERE().test(rest)) {
      out.push(finding(view, 'DESTRUCTIVE', kind === 'delete' ? 0.9 : 0.75, `sql.${kind}_without_where`, start, end));
    } else if (TAUTOLOGY().test(rest)) {
      out.push(finding(view, 'DESTRUCTIVE', kind === 'delete' ? 0.85 : 0.7, `sql.${kind}_all_rows`, start, end));
    } else if (kind === 'delete') {
      out.push(finding(view, 'DESTRUCTIVE', 0.25, 'sql.delete_where', start, end));
    }
  }
}
