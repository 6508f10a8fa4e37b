/** The most of one context value an approval keeps, as JSON. */
export const MAX_CONTEXT_VALUE_BYTES = 8 * 1024;

/**
 * The evaluation context as the approval keeps it: what a reviewer reads, as JSON. A value
 * larger than `MAX_CONTEXT_VALUE_BYTES` (a tool's arguments, say) is replaced by a note of its
 * size, so the request to open the approval stays far below NATS's payload limit whatever the
 * call carried, and a held call holds no second copy of its body.
 */
export function heldContext(context: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(context)) {
    const json = JSON.stringify(value) as string | undefined;
    if (json === undefined) continue;
    const bytes = Buffer.byteLength(json);
    kept[key] = bytes <= MAX_CONTEXT_VALUE_BYTES ? value : `[${bytes} bytes, not kept]`;
  }
  return kept;
}
