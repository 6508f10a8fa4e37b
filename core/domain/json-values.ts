/**
 * Walks over JSON values of any depth without recursion: a payload is checked and cleaned before
 * its depth is known to be sane.
 */

/** Whether objects and arrays in `value` nest at most `max` levels, `value` being the first. */
export function nestsWithin(value: unknown, max: number): boolean {
  // Only objects and arrays are queued: a record's scalars, nearly all it holds, cost no entry.
  const pending: Array<[object, number]> = typeof value === 'object' && value !== null ? [[value, 1]] : [];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, depth] = next;
    if (depth > max) return false;
    for (const child of Object.values(node) as unknown[]) {
      if (typeof child === 'object' && child !== null) pending.push([child, depth + 1]);
    }
  }
  return true;
}

/**
 * `value` with every unpaired UTF-16 surrogate in its strings, object keys included, replaced by
 * U+FFFD, as storage would keep them. Changes `value` in place (a value fresh from `JSON.parse`)
 * and returns it; a string is returned cleaned.
 */
export function makeWellFormed<T>(value: T): T {
  if (typeof value === 'string') return value.toWellFormed() as T;
  const pending: object[] = typeof value === 'object' && value !== null ? [value] : [];
  for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
    const record = node as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const child = record[key];
      if (typeof child === 'object' && child !== null) pending.push(child);
      const cleanKey = key.toWellFormed();
      const cleanChild = typeof child === 'string' ? child.toWellFormed() : child;
      if (cleanKey === key && cleanChild === child) continue;
      if (cleanKey !== key) delete record[key];
      // Defined rather than assigned, so that a key named __proto__ stays an own property.
      Object.defineProperty(record, cleanKey, {
        value: cleanChild,
        writable: true,
        enumerable: true,
        configurable: true,
      });
    }
  }
  return value;
}
