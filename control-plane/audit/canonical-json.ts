/**
 * JSON with object keys sorted at every level, so equal records always hash equally. Records
 * already chained were hashed over this text: its output must never change.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return out + ']';
  }
  const record = value as Record<string, unknown>;
  // The default sort compares UTF-16 code units, as the text's first definition did.
  const keys = Object.keys(record).sort();
  let out = '{';
  for (const key of keys) {
    const child = record[key];
    if (child === undefined) continue;
    out += (out.length === 1 ? '' : ',') + JSON.stringify(key) + ':' + canonicalJson(child);
  }
  return out + '}';
}
