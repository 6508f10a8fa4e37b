/**
 * A cheap necessary condition for an RE2 pattern, so a `matches` condition rejects most texts
 * without running the automaton (which costs about 10 ns per character on a long text):
 * - literal runs every match contains (`drop` and `table` in `(?i)\bdrop\s+table\b`), searched
 *   with `includes`, or for a case-insensitive pattern as the characters RE2 folds together
 *   (`k` with `K` and U+212A KELVIN SIGN, `s` with `S` and U+017F LONG S);
 * - for a pattern every match of which ends at the end of the text (`(a+)+$`, `\.exe\z`), the
 *   characters a match can end with, against the text's last character.
 *
 * The pattern is read conservatively: a construct the reader does not know for certain
 * (flags other than a leading `(?ims)`, `\x`, `\p`, `\Q`, lookbehind, non-ASCII literals in
 * a case-insensitive pattern, an unusual `{`) yields no prefilter, and the condition runs RE2
 * alone. The prefilter only ever answers "cannot match"; RE2 decides everything else.
 */
export type Prefilter = (text: string) => boolean;

type Node =
  | { readonly kind: 'char'; readonly chars: readonly string[] }
  | { readonly kind: 'any' }
  | { readonly kind: 'empty'; readonly end: boolean }
  | { readonly kind: 'cat'; readonly items: readonly Node[] }
  | { readonly kind: 'alt'; readonly items: readonly Node[] }
  | { readonly kind: 'repeat'; readonly item: Node; readonly min: number; readonly max: number };

const ANY: Node = { kind: 'any' };
const MAX_RUNS = 3;

class Unsupported extends Error {}

/** The prefilter of an RE2 pattern that compiled, or null when the pattern is beyond the reader. */
export function regexPrefilter(pattern: string): Prefilter | null {
  let node: Node;
  try {
    node = new Reader(pattern).read();
  } catch (error) {
    if (error instanceof Unsupported) return null;
    throw error;
  }
  const tests: Prefilter[] = literalRuns(node)
    .sort((a, b) => b.length - a.length)
    .slice(0, MAX_RUNS)
    .map(runTest);
  if (endsAtEnd(node) && !nullable(node)) {
    const last = lastChars(node);
    if (last !== null) tests.push((text) => text.length > 0 && last.has(text.charAt(text.length - 1)));
  }
  if (tests.length === 0) return null;
  return (text) => {
    for (const test of tests) if (!test(text)) return false;
    return true;
  };
}

/** Reads the pattern into the few shapes the analysis needs; throws Unsupported on anything else. */
class Reader {
  readonly #pattern: string;
  #at = 0;
  #fold = false;
  #multiline = false;

  constructor(pattern: string) {
    this.#pattern = pattern;
  }

  read(): Node {
    const flags = /^\(\?([imsU]+)\)/.exec(this.#pattern);
    if (flags !== null) {
      this.#fold = flags[1]?.includes('i') ?? false;
      this.#multiline = flags[1]?.includes('m') ?? false;
      this.#at = flags[0].length;
    }
    const node = this.#alternation();
    if (this.#at !== this.#pattern.length) throw new Unsupported();
    return node;
  }

  #alternation(): Node {
    const items = [this.#concatenation()];
    while (this.#peek() === '|') {
      this.#at++;
      items.push(this.#concatenation());
    }
    return items.length === 1 ? (items[0] as Node) : { kind: 'alt', items };
  }

  #concatenation(): Node {
    const items: Node[] = [];
    for (let c = this.#peek(); c !== undefined && c !== '|' && c !== ')'; c = this.#peek()) {
      items.push(this.#repetition(this.#atom()));
    }
    return { kind: 'cat', items };
  }

  #repetition(item: Node): Node {
    const c = this.#peek();
    let min: number;
    let max: number;
    if (c === '*' || c === '+' || c === '?') {
      this.#at++;
      min = c === '+' ? 1 : 0;
      max = c === '?' ? 1 : Infinity;
    } else if (c === '{') {
      const counted = /^\{(\d+)(,(\d*))?\}/.exec(this.#pattern.slice(this.#at));
      if (counted === null) throw new Unsupported();
      this.#at += counted[0].length;
      min = Number(counted[1]);
      max = counted[2] === undefined ? min : counted[3] === '' ? Infinity : Number(counted[3]);
    } else {
      return item;
    }
    if (this.#peek() === '?') this.#at++;
    const next = this.#peek();
    if (next === '*' || next === '+' || next === '?' || next === '{') throw new Unsupported();
    return { kind: 'repeat', item, min, max };
  }

  #atom(): Node {
    const c = this.#pattern[this.#at++] as string;
    switch (c) {
      case '.':
        return ANY;
      case '^':
        return { kind: 'empty', end: false };
      case '$':
        return { kind: 'empty', end: !this.#multiline };
      case '[':
        this.#skipClass();
        return ANY;
      case '(':
        return this.#group();
      case '\\':
        return this.#escape();
      case '*':
      case '+':
      case '?':
      case '{':
      case '}':
      case ')':
        throw new Unsupported();
      default:
        return this.#literal(c);
    }
  }

  #group(): Node {
    if (this.#peek() === '?') {
      const named = /^\?(?::|P?<[A-Za-z0-9_]+>)/.exec(this.#pattern.slice(this.#at));
      if (named === null) throw new Unsupported();
      this.#at += named[0].length;
    }
    const node = this.#alternation();
    if (this.#pattern[this.#at++] !== ')') throw new Unsupported();
    return node;
  }

  #escape(): Node {
    const c = this.#pattern[this.#at++];
    if (c === undefined) throw new Unsupported();
    if ('dDwWsSntrfv'.includes(c)) return ANY;
    if (c === 'b' || c === 'B' || c === 'A') return { kind: 'empty', end: false };
    if (c === 'z') return { kind: 'empty', end: true };
    if (/^[!-/:-@[-`{-~]$/.test(c)) return this.#literal(c);
    throw new Unsupported();
  }

  /** Skips a bracketed class; what it holds does not matter, only where it ends. */
  #skipClass(): void {
    const pattern = this.#pattern;
    if (pattern[this.#at] === '^') this.#at++;
    if (pattern[this.#at] === ']') this.#at++;
    for (;;) {
      const c = pattern[this.#at];
      if (c === undefined) throw new Unsupported();
      if (c === ']') {
        this.#at++;
        return;
      }
      if (c === '\\') {
        if (!/^[!-/:-@[-`{-~dDwWsSntrfv]$/.test(pattern[this.#at + 1] ?? '')) throw new Unsupported();
        this.#at += 2;
      } else if (c === '[' && pattern[this.#at + 1] === ':') {
        const close = pattern.indexOf(':]', this.#at + 2);
        if (close < 0) throw new Unsupported();
        this.#at = close + 2;
      } else {
        this.#at++;
      }
    }
  }

  #literal(c: string): Node {
    if (c > '\u007f') {
      // A case-insensitive non-ASCII letter folds with characters this reader does not list.
      if (this.#fold) throw new Unsupported();
      return ANY;
    }
    return { kind: 'char', chars: this.#fold ? foldOrbit(c) : [c] };
  }

  #peek(): string | undefined {
    return this.#pattern[this.#at];
  }
}

/** The characters RE2's case folding matches for an ASCII character (simple Unicode folding). */
function foldOrbit(c: string): string[] {
  const lower = c.toLowerCase();
  const upper = c.toUpperCase();
  if (lower === upper) return [c];
  if (lower === 'k') return ['k', 'K', '\u212a'];
  if (lower === 's') return ['s', 'S', '\u017f'];
  return [lower, upper];
}

/** Runs of characters every match contains, in order, each given as its choices per position. */
function literalRuns(node: Node): (readonly string[])[][] {
  switch (node.kind) {
    case 'char':
      return [[node.chars]];
    case 'repeat':
      return node.min >= 1 ? literalRuns(node.item) : [];
    case 'cat': {
      const runs: (readonly string[])[][] = [];
      let run: (readonly string[])[] = [];
      for (const item of node.items) {
        if (item.kind === 'char') {
          run.push(item.chars);
          continue;
        }
        if (run.length > 0) runs.push(run);
        run = [];
        runs.push(...literalRuns(item));
      }
      if (run.length > 0) runs.push(run);
      return runs;
    }
    default:
      return [];
  }
}

function runTest(run: readonly (readonly string[])[]): Prefilter {
  if (run.every((choices) => choices.length === 1)) {
    const needle = run.join('');
    return (text) => text.includes(needle);
  }
  // A fixed sequence of classes: no quantifier, so the search is linear in the text. Each
  // position's characters are looked for alone first, which rejects most texts sooner.
  const classes = run.map((choices) => `[${choices.map(escapeClassMember).join('')}]`).join('');
  const regex = new RegExp(classes, 'u');
  const positions = [...new Set(run.map((choices) => choices.join('')))].map((key) => [...key]);
  return (text) => positions.every((choices) => choices.some((c) => text.includes(c))) && regex.test(text);
}

function escapeClassMember(c: string): string {
  return /[\\\]^-]/.test(c) ? `\\${c}` : c;
}

function nullable(node: Node): boolean {
  switch (node.kind) {
    case 'char':
    case 'any':
      return false;
    case 'empty':
      return true;
    case 'cat':
      return node.items.every(nullable);
    case 'alt':
      return node.items.some(nullable);
    case 'repeat':
      return node.min === 0 || nullable(node.item);
  }
}

/** Whether every match ends at the end of the text. */
function endsAtEnd(node: Node): boolean {
  switch (node.kind) {
    case 'empty':
      return node.end;
    // Once a part has reached the end, what follows it can only match the empty string there.
    case 'cat':
      return node.items.some(endsAtEnd);
    case 'alt':
      return node.items.every(endsAtEnd);
    case 'repeat':
      return node.min >= 1 && endsAtEnd(node.item);
    default:
      return false;
  }
}

/** The characters a non-empty match can end with, or null for any character. */
function lastChars(node: Node): Set<string> | null {
  const found = new Set<string>();
  const collect = (n: Node): boolean => {
    switch (n.kind) {
      case 'char':
        for (const c of n.chars) found.add(c);
        return true;
      case 'any':
        return false;
      case 'empty':
        return true;
      case 'repeat':
        return n.max === 0 || collect(n.item);
      case 'alt':
        return n.items.every(collect);
      case 'cat':
        for (let i = n.items.length - 1; i >= 0; i--) {
          const item = n.items[i] as Node;
          if (!collect(item)) return false;
          if (!nullable(item)) break;
        }
        return true;
    }
  };
  return collect(node) ? found : null;
}
