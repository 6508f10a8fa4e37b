import { RE2JS } from 're2js';
import { lazyRegex } from './lazy-regex.ts';
import type { IntentCategory } from '../policy/semantic-judge.ts';
import { rawSpan, type TextView } from './text-view.ts';

/** One thing the judge saw: a category, how strongly it points there, and where. */
export interface Finding {
  readonly category: IntentCategory;
  /** 0..1; the verdict's confidence is the strongest finding's weight. */
  readonly weight: number;
  readonly signal: string;
  readonly field: string;
  /** Span in the field's original text. */
  readonly start: number;
  readonly end: number;
  readonly excerpt: string;
}

const EXCERPT_CHARS = 80;

/** Credentials are shown by their first four characters only: evidence travels to logs, audit and agents. */
export function maskSecret(text: string): string {
  return `${text.slice(0, 4)}…[${text.length} chars masked]`;
}

/** A finding for the normalised span [start, end) of a view. */
export function finding(
  view: TextView,
  category: IntentCategory,
  weight: number,
  signal: string,
  start: number,
  end: number,
  secret = false,
): Finding {
  const span = rawSpan(view, start, end);
  const text = view.raw.slice(span.start, span.end);
  const excerpt = secret
    ? maskSecret(text)
    : text.length > EXCERPT_CHARS
      ? `${text.slice(0, EXCERPT_CHARS - 1)}…`
      : text;
  return { category, weight, signal, field: view.field, start: span.start, end: span.end, excerpt };
}

/**
 * A pattern signal. `triggers` are literal (lower-case) substrings one of which must occur in
 * the normalised text before the RE2 pattern runs: a cheap prefilter that keeps a judgement on
 * benign text to a few string searches. RE2 matches in linear time, so no input can slow it.
 */
export interface PatternSignal {
  readonly signal: string;
  readonly category: IntentCategory;
  readonly weight: number;
  readonly triggers: readonly string[];
  readonly pattern: string;
  /** The match is a credential: its excerpt is masked. */
  readonly secret?: boolean;
  /** A match inside quoted data (a SQL string literal, the pattern `grep` looks for) is not an action. */
  readonly action?: boolean;
  /** A SQL statement: matched also with SQL comments blanked out, so `DROP/**\/TABLE` is `DROP TABLE`. */
  readonly statement?: boolean;
}

export interface CompiledPattern extends PatternSignal {
  /** Compiled when its triggers first occur (lazy-regex.ts). */
  readonly regex: () => RE2JS;
}

export function compilePatterns(signals: readonly PatternSignal[]): CompiledPattern[] {
  return signals.map((s) => ({ ...s, regex: lazyRegex(s.pattern, RE2JS.CASE_INSENSITIVE | RE2JS.MULTILINE) }));
}

/**
 * Runs the patterns whose triggers occur; at most one finding per pattern (its first match that
 * counts). `quotedData` says whether a position lies in quoted data, for the action patterns.
 */
export function matchPatterns(
  view: TextView,
  patterns: readonly CompiledPattern[],
  out: Finding[],
  quotedData: (index: number) => boolean,
): void {
  const text = view.norm;
  for (const p of patterns) {
    if (!p.triggers.some((t) => text.includes(t))) continue;
    const m = p.regex().matcher(text);
    let from = 0;
    while (from < text.length && m.find(from)) {
      if (p.action === true && quotedData(m.start())) {
        from = Math.max(m.end(), m.start() + 1);
        continue;
      }
      out.push(finding(view, p.category, p.weight, p.signal, m.start(), m.end(), p.secret === true));
      break;
    }
  }
}

/** Where a quoted string is a value, not a statement: after `(`, `,`, `=`, `values`, `like`, `in`. */
const LITERAL_LEAD = /(?:\(|,|=|\bvalues|\blike|\bin|\bthen|\belse)\s*$/;

/** Single-quoted strings where SQL takes a value (after `(`, `,`, `=`, `values`, `like`…): [open, close] quotes, in order. */
export function sqlLiterals(text: string): [number, number][] {
  const literals: [number, number][] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== "'") continue;
    const close = text.indexOf("'", i + 1);
    if (close < 0) break;
    if (LITERAL_LEAD.test(text.slice(Math.max(0, i - 12), i))) literals.push([i, close]);
    i = close;
  }
  return literals;
}

/**
 * Positions in quoted data: inside a single-quoted SQL literal, or anywhere in a command whose
 * programs only search or print text (`grep "DROP TABLE"`, `echo 'rm -rf /'`).
 */
export function quotedDataOf(view: TextView, textOnly: boolean): (index: number) => boolean {
  if (textOnly) return () => true;
  const literals = sqlLiterals(view.norm);
  // The literals are in order and apart: the one that could hold `index` is the last opening before it.
  return (index) => {
    let low = 0;
    let high = literals.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if ((literals[mid] as [number, number])[0] < index) low = mid + 1;
      else high = mid;
    }
    const literal = literals[low - 1];
    return literal !== undefined && index < literal[1];
  };
}
