import { readFileSync } from 'node:fs';
import protobuf from 'protobufjs';
// Adds Root.fromDescriptor, which reads the compiled descriptor set the server already ships.
import 'protobufjs/ext/descriptor/index.js';
import { DESCRIPTOR_SET_FILE } from './contracts.ts';

/** protobufjs's own nesting limit (Reader.recursionLimit): past it the decoder refuses the message anyway. */
const MAX_DEPTH = 100;

/**
 * How many messages `bytes`, a message of `type`, holds, nested ones included (a `google.protobuf.Value`
 * each, a Struct or a ListValue each), read from the wire without decoding. Decoding builds objects
 * for every one of them before any bound on their number is checked: a million empty lists in a
 * 4 MB `SaveCheckpoint` held the event loop for seconds. Counting stops once past `limit`; bytes
 * that are not valid protobuf end the count where they start, for the decoder to refuse.
 */
export function messagesIn(type: protobuf.Type, bytes: Uint8Array, limit: number): number {
  const reader = protobuf.Reader.create(bytes);
  let count = 0;

  /** Walks the fields of a message of `of` up to `end`; false once the count is past the limit or the bytes are broken. */
  const walk = (of: protobuf.Type, end: number, depth: number, mapValue: protobuf.Field | null): boolean => {
    while (reader.pos < end) {
      const tag = reader.uint32();
      const wireType = tag & 7;
      // A map's entry is a message of its own on the wire: its field 2 is the value.
      const field = mapValue !== null ? (tag >>> 3 === 2 ? mapValue : undefined) : of.fieldsById[tag >>> 3];
      const nested = field?.resolvedType;
      if (wireType !== 2 || field === undefined || (!field.map && !(nested instanceof protobuf.Type))) {
        reader.skipType(wireType);
        continue;
      }
      const length = reader.uint32();
      const inner = reader.pos + length;
      if (inner > end) return false;
      if (field.map && mapValue === null) {
        if (!walk(of, inner, depth, field)) return false;
      } else if (nested instanceof protobuf.Type) {
        if (++count > limit) return false;
        if (depth < MAX_DEPTH && !walk(nested, inner, depth + 1, null)) return false;
      }
      reader.pos = inner;
    }
    return true;
  };

  try {
    walk(type, bytes.length, 0, null);
  } catch {
    // Truncated or malformed: the decoder answers it.
  }
  return count;
}

let root: protobuf.Root | undefined;

/**
 * The request type of the method at `path` (`/svc.checkpoint.v1.CheckpointService/SaveCheckpoint`),
 * from the compiled contracts, read on the first large request (about 0.2 s) rather than at start.
 */
export function requestTypeOf(path: string): protobuf.Type | undefined {
  if (root === undefined) {
    root = (protobuf.Root as unknown as { fromDescriptor(set: Uint8Array): protobuf.Root }).fromDescriptor(
      readFileSync(DESCRIPTOR_SET_FILE),
    );
    root.resolveAll();
  }
  const [, service, method] = path.split('/');
  const found = root.lookup(service ?? '');
  return found instanceof protobuf.Service
    ? (found.methods[method ?? '']?.resolvedRequestType ?? undefined)
    : undefined;
}
