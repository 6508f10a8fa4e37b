const CLOSE = 0x7d; // }
const OPEN = 0x7b; // {
const COMMA = 0x2c; // ,

function isJsonSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/**
 * The UTF-8 text of a JSON object with top-level `fields` added before its closing brace, none of
 * them in it before (the caller's word: a key twice in one object is read differently by
 * different parsers). Undefined when the text does not end as an object does. A non-empty
 * object's last member ends with its value, never with `{`, so the byte before the closing
 * brace tells an empty object.
 */
export function appendFields(json: Buffer, fields: Record<string, unknown>): Buffer | undefined {
  let end = json.length - 1;
  while (isJsonSpace(json[end])) end--;
  if (json[end] !== CLOSE) return undefined;
  let last = end - 1;
  while (isJsonSpace(json[last])) last--;
  if (last < 0) return undefined;
  // `{"a":1}` gives `"a":1`: the members without their braces.
  const members = JSON.stringify(fields).slice(1, -1);
  if (members.length === 0) return json;
  // One copy of the body, into a buffer of its final size.
  const comma = json[last] === OPEN ? 0 : 1;
  const out = Buffer.allocUnsafe(last + 1 + comma + Buffer.byteLength(members) + json.length - end);
  let at = json.copy(out, 0, 0, last + 1);
  if (comma === 1) out[at++] = COMMA;
  at += out.write(members, at);
  json.copy(out, at, end);
  return out;
}
