import fc from 'fast-check';
import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import { regexPrefilter } from './regex-prefilter.ts';

/** Pieces that build patterns within and just beyond what the reader knows. */
const atom = fc.constantFrom(
  'a',
  'b',
  'k',
  's',
  'K',
  '-',
  '.',
  '\\.',
  '\\d',
  '\\w',
  '\\s',
  '\\b',
  '[ab]',
  '[^a]',
  '[]a]',
  '[[:alpha:]]',
  '^',
  '$',
  '\\z',
  '\\A',
  '(?:ab|b)',
  '(a+)',
  '(?P<n>ka)',
  '(?:$)',
  '(?:a|$)',
  'é',
  '\\x41',
  '\\pL',
);
const quantifier = fc.constantFrom('', '', '', '*', '+', '?', '{2}', '{0}', '{1,3}', '{2,}', '+?');
const pattern = fc
  .tuple(
    fc.constantFrom('', '', '(?i)', '(?m)', '(?s)', '(?im)'),
    fc.array(fc.tuple(atom, quantifier), { minLength: 1, maxLength: 6 }),
    fc.constantFrom('', '', '$', '|b$', '|ab'),
  )
  .map(([flags, parts, tail]) => flags + parts.map(([a, q]) => a + q).join('') + tail);
const text = fc
  .array(fc.constantFrom('a', 'b', 'k', 's', 'K', 'S', '\u212a', '\u017f', '-', '.', ' ', '\n', '1', 'é', 'ka'), {
    maxLength: 12,
  })
  .map((parts) => parts.join(''));

function compiles(source: string, flags = 0): RE2JS | null {
  try {
    return RE2JS.compile(source, flags);
  } catch {
    return null;
  }
}

describe('regex prefilter', () => {
  it("never rules out a text the pattern matches, its . crossing line breaks (a restrictive rule's) or not", () => {
    let filtered = 0;
    fc.assert(
      fc.property(pattern, fc.array(text, { minLength: 1, maxLength: 8 }), (source, texts) => {
        const regex = compiles(source);
        if (regex === null) return;
        const crossing = compiles(source, RE2JS.DOTALL) as RE2JS;
        const mayMatch = regexPrefilter(source);
        if (mayMatch === null) return;
        for (const t of texts) {
          if (regex.test(t) || crossing.test(t)) expect(mayMatch(t), `${source} on ${JSON.stringify(t)}`).toBe(true);
          else if (!mayMatch(t)) filtered++;
        }
      }),
      { numRuns: 20_000 },
    );
    // The property is only worth something if the prefilter does rule texts out.
    expect(filtered).toBeGreaterThan(1000);
  });

  it('rules out adversarial texts without running the automaton', () => {
    const adversarial = 'a'.repeat(2000) + '!';
    for (const source of [
      String.raw`(?i)\bdrop\s+table\b`,
      String.raw`\b\d{3}-\d{2}-\d{4}\b`,
      String.raw`(?i)api[_-]?key\s*[:=]`,
      '(a+)+$',
      String.raw`^SELECT .* FROM \w+`,
    ]) {
      expect(regexPrefilter(source)?.(adversarial), source).toBe(false);
    }
    expect(regexPrefilter('(a+)+$')?.('b' + 'a'.repeat(50))).toBe(true);
    expect(regexPrefilter('(?i)drop table')?.('DROP TABLE x')).toBe(true);
  });

  it('folds case as RE2 does: k with the Kelvin sign, s with the long s', () => {
    expect(regexPrefilter('(?i)key')?.('\u212aEY')).toBe(true);
    expect(regexPrefilter('(?i)ssn')?.('\u017fSn')).toBe(true);
    expect(regexPrefilter('(?i)ab$')?.('xA\u0042')).toBe(true);
    // The lists above are all RE2 folds onto ASCII letters: nothing else in Unicode matches.
    const letters = RE2JS.compile('(?i)[a-z]');
    const others = RE2JS.compile('(?i)[\\x00-\\x40\\x5b-\\x60\\x7b-\\x7f]');
    const extra: number[] = [];
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      if (letters.matches(c) || others.matches(c)) extra.push(cp);
    }
    expect(extra).toEqual([0x17f, 0x212a]);
  });

  it('gives no prefilter for what it does not read for certain', () => {
    for (const source of ['\\x41', '\\pL+', '(?i:a)b', 'a(?i)b', '(?<=a)b', '\\Qa.b\\E', '(?i)é', 'a{,2}', 'a|b']) {
      expect(regexPrefilter(source), source).toBeNull();
    }
  });
});
