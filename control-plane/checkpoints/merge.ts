import { isDeepStrictEqual } from 'node:util';
import type { MergeStrategy } from './checkpoint.ts';

type Values = Record<string, unknown>;

const isObject = (value: unknown): value is Values =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `updates` laid over `stored` key by key, objects merged at every depth; other values replace. */
export function mergeRecursive(stored: Values, updates: Values): Values {
  // Built as entries: a key such as `__proto__` stays a key, never a prototype.
  const merged = new Map(Object.entries(stored));
  for (const [key, value] of Object.entries(updates)) {
    const before = merged.get(key);
    merged.set(key, isObject(before) && isObject(value) ? mergeRecursive(before, value) : value);
  }
  return Object.fromEntries(merged);
}

/** The first updated key whose stored value differs (what FAIL_ON_CONFLICT refuses), if any. */
export function conflictingKey(stored: Values, updates: Values): string | undefined {
  return Object.keys(updates).find(
    (key) => Object.hasOwn(stored, key) && !isDeepStrictEqual(stored[key], updates[key]),
  );
}

/**
 * The context's values after an update: `updates` combined with `stored` by `strategy` (CUSTOM is
 * refused before this), then `deleteKeys` removed.
 */
export function applyUpdate(
  stored: Values,
  updates: Values,
  deleteKeys: readonly string[],
  strategy: Exclude<MergeStrategy, 'CUSTOM'>,
): Values {
  const combined =
    strategy === 'MERGE_RECURSIVE'
      ? mergeRecursive(stored, updates)
      : Object.fromEntries([...Object.entries(stored), ...Object.entries(updates)]);
  const removed = new Set(deleteKeys);
  return Object.fromEntries(Object.entries(combined).filter(([key]) => !removed.has(key)));
}
