/**
 * Walks over JSON values of any depth without recursion: a payload is checked and cleaned before
 * its depth is known to be sane.
 */

/** Whether objects and arrays in `value` nest at most `max` levels, `value` being the first. */
export function nestsWithin(value: unknown, max: number): boolean {
  // Every record staged for LMDB is checked: only objects and arrays are queued, so a record's
  // scalars, nearly all it holds, cost no entry (`jsonExcess` below counts them as well).
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

/** What a JSON value exceeds first of the bounds given: its count of values or its nesting. */
export type JsonExcess = 'values' | 'depth';

/**
 * Whether `root` holds more than `maxValues` values or nests deeper than `maxDepth` (`root`
 * being the first level), for any tree form of JSON: `children` gives a node's children, or
 * undefined for a scalar. Stops at the first excess, so its cost is bounded by the limits.
 */
export function jsonExcess(
  root: unknown,
  children: (node: unknown) => unknown[] | undefined,
  maxValues: number,
  maxDepth: number,
): JsonExcess | undefined {
  let values = 1;
  const pending: Array<[unknown, number]> = [[root, 1]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, depth] = next;
    const below = children(node);
    if (below === undefined) continue;
    if (depth > maxDepth) return 'depth';
    values += below.length;
    if (values > maxValues) return 'values';
    for (const child of below) pending.push([child, depth + 1]);
  }
  return undefined;
}

/** The children of a value as JSON.parse gives it. */
export function parsedChildren(node: unknown): unknown[] | undefined {
  return typeof node === 'object' && node !== null ? Object.values(node) : undefined;
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

/** Objects whose own enumerable properties are all a copy needs to keep. */
function isPlainData(value: object): boolean {
  if (Array.isArray(value)) return Object.getPrototypeOf(value) === Array.prototype;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * A deep copy of `value` cleaned as `makeWellFormed` cleans, leaving `value` untouched, in one
 * walk and without recursion: what `makeWellFormed(structuredClone(value))` gives, without
 * `structuredClone`'s serialisation, which cost more than the rest of an audit append. Plain
 * objects and arrays are copied here (holes and extra properties of arrays kept); anything else
 * (a Date, a Map, a class's instance) is copied by `structuredClone` and cleaned, and a function
 * or symbol is refused by it as before.
 */
export function wellFormedCopy<T>(value: T): T {
  const pending: Array<[object, object]> = [];
  const copy = (child: unknown): unknown => {
    if (typeof child === 'string') return child.toWellFormed();
    if (typeof child === 'function' || typeof child === 'symbol') return structuredClone(child);
    if (typeof child !== 'object' || child === null) return child;
    if (!isPlainData(child)) return makeWellFormed(structuredClone(child));
    const target: object = Array.isArray(child) ? new Array<unknown>(child.length) : {};
    pending.push([child, target]);
    return target;
  };
  const define = (target: object, key: string, child: unknown): void => {
    // Defined rather than assigned, so that a key named __proto__ stays an own property.
    if (key === '__proto__')
      Object.defineProperty(target, key, { value: child, writable: true, enumerable: true, configurable: true });
    else (target as Record<string, unknown>)[key] = child;
  };
  const root = copy(value);
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [source, target] = next;
    const record = source as Record<string, unknown>;
    // A key that had to be cleaned goes after the others, where makeWellFormed's redefinition puts it.
    let renamed: string[] | undefined;
    for (const key of Object.keys(record)) {
      if (key.isWellFormed()) define(target, key, copy(record[key]));
      else (renamed ??= []).push(key);
    }
    for (const key of renamed ?? []) define(target, key.toWellFormed(), copy(record[key]));
  }
  return root as T;
}
