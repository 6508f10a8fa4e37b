/**
 * One piece of text the judge reads: a field (`tool_args.command`), its text as sent, and a
 * normalised copy the signals run on, with the offset of each normalised character in the
 * original, so evidence names the span as the agent sent it.
 */
export interface TextView {
  readonly field: string;
  /** The JSON key that held the text (`command`, `path`), lower case; '' for a whole field. */
  readonly key: string;
  readonly raw: string;
  /** `norm` before lower-casing (shell flags are case-sensitive: `-D` is not `-d`). */
  readonly folded: string;
  /** Lower-cased, zero-width characters dropped, full-width forms and tag characters mapped to ASCII. */
  readonly norm: string;
  /** `map[i]` is the index in `raw` of `norm[i]`; `map[norm.length]` is `raw.length`. */
  readonly map: Int32Array;
  /** The text held invisible characters: zero-width ones or Unicode tag characters (hidden ASCII). */
  readonly hidden: 'none' | 'zero-width' | 'tags';
}

/** Any character outside printable ASCII, tab and newline: only then is the slow path needed. */
const NON_ASCII = /[^\t\n\r -~]/;

function isZeroWidth(code: number): boolean {
  return (code >= 0x200b && code <= 0x200f) || (code >= 0x2060 && code <= 0x2064) || code === 0xfeff || code === 0x00ad;
}

export function viewOf(field: string, key: string, raw: string): TextView {
  const map = new Int32Array(raw.length + 1);
  if (!NON_ASCII.test(raw)) {
    for (let i = 0; i <= raw.length; i++) map[i] = i;
    return { field, key, raw, folded: raw, norm: raw.toLowerCase(), map, hidden: 'none' };
  }
  let folded = '';
  let hidden: TextView['hidden'] = 'none';
  let n = 0;
  for (let i = 0; i < raw.length; i++) {
    let code = raw.charCodeAt(i);
    if (isZeroWidth(code)) {
      if (hidden === 'none') hidden = 'zero-width';
      continue;
    }
    // Unicode tag characters (U+E0020..U+E007E) spell ASCII a reader does not see: read them as that ASCII.
    if (code === 0xdb40 && i + 1 < raw.length) {
      const low = raw.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdc7f) {
        hidden = 'tags';
        const ascii = low - 0xdc00;
        if (ascii >= 0x20 && ascii <= 0x7e) {
          folded += String.fromCharCode(ascii);
          map[n++] = i;
        }
        i++;
        continue;
      }
    }
    if (code >= 0xff01 && code <= 0xff5e) code -= 0xfee0;
    else if (code === 0x3000) code = 0x20;
    folded += String.fromCharCode(code);
    map[n++] = i;
  }
  const trimmed = map.slice(0, n + 1);
  trimmed[n] = raw.length;
  // Letters change case only where that keeps the length (`И` to `и`, not `İ`), so both texts share the map.
  const norm = folded.replace(/[A-Z\u00c0-\uffff]/g, (c) => {
    const l = c.toLowerCase();
    return l.length === 1 ? l : c;
  });
  return { field, key, raw, folded, norm, map: trimmed, hidden };
}

/** The span in the original text of the normalised span [start, end). */
export function rawSpan(view: TextView, start: number, end: number): { start: number; end: number } {
  const from = view.map[start] ?? view.raw.length;
  const last = end > start ? (view.map[end - 1] ?? view.raw.length - 1) + 1 : from;
  return { start: from, end: Math.max(from, last) };
}
