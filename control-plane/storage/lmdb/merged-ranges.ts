import { compareIds, type Entry } from './kv.ts';

/**
 * The entries of several ranges, each already in id order (or reversed), as one range in that
 * order: a list over a few key ranges (one execution's each) reads only those, never the whole
 * tenant. Ids must be unique across the ranges.
 */
export function* mergedRanges<T>(ranges: ReadonlyArray<Iterable<Entry<T>>>, reverse: boolean): Generator<Entry<T>> {
  const direction = reverse ? -1 : 1;
  const before = (a: Entry<T>, b: Entry<T>) => compareIds(a.id, b.id) * direction < 0;
  // The next entry of each range not yet done, kept sorted so the first is the one to yield.
  const heads: Array<{ entry: Entry<T>; rest: Iterator<Entry<T>> }> = [];
  const enter = (rest: Iterator<Entry<T>>) => {
    const next = rest.next();
    if (next.done === true) return;
    let low = 0;
    let high = heads.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (before(heads[mid]!.entry, next.value)) low = mid + 1;
      else high = mid;
    }
    heads.splice(low, 0, { entry: next.value, rest });
  };
  for (const range of ranges) enter(range[Symbol.iterator]());
  while (heads.length > 0) {
    const { entry, rest } = heads.shift()!;
    yield entry;
    enter(rest);
  }
}
