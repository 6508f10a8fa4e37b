export type ActionMatcher = (action: string) => boolean;

const matchAny: ActionMatcher = () => true;

/**
 * Compiles an action pattern where `*` stands for any run of characters (`tool:*`,
 * `llm:gpt-4*`, `*:delete`, `execution:start`, `*`). Matching walks the literal pieces with
 * `startsWith`/`indexOf`, so it is linear in the action and allocates nothing.
 */
export function compileActionPattern(pattern: string): ActionMatcher {
  if (pattern.length === 0) throw new RangeError('action pattern is empty');
  const pieces = pattern.split('*');
  if (pieces.length === 1) return (action) => action === pattern;
  if (pieces.every((p) => p.length === 0)) return matchAny;
  const head = pieces[0] ?? '';
  const tail = pieces[pieces.length - 1] ?? '';
  const middle = pieces.slice(1, -1).filter((p) => p.length > 0);
  const minLength = head.length + tail.length;
  if (middle.length === 0) {
    return (action) => action.length >= minLength && action.startsWith(head) && action.endsWith(tail);
  }
  return (action) => {
    if (action.length < minLength || !action.startsWith(head) || !action.endsWith(tail)) return false;
    // Leftmost placement of each middle piece is optimal for a `*`-only glob.
    let at = head.length;
    const end = action.length - tail.length;
    for (const piece of middle) {
      const found = action.indexOf(piece, at);
      if (found < 0 || found + piece.length > end) return false;
      at = found + piece.length;
    }
    return true;
  };
}
