import {
  jsonExcess,
  MAX_JSON_VALUES,
  MAX_METADATA_DEPTH,
  PathIdSchema,
  TimestampSchema,
} from '../../../core/domain/index.ts';
import { SvcError, tooManyValues } from '../../../core/errors/index.ts';

/** google.protobuf.Timestamp as @grpc/proto-loader gives and takes it (seconds as a string). */
export interface Timestamp {
  seconds: string | number;
  nanos: number;
}

export function toTimestamp(iso: string): Timestamp;
export function toTimestamp(iso: string | null | undefined): Timestamp | null;
export function toTimestamp(iso: string | null | undefined): Timestamp | null {
  if (iso === null || iso === undefined) return null;
  const ms = Date.parse(iso);
  return { seconds: String(Math.floor(ms / 1000)), nanos: (((ms % 1000) + 1000) % 1000) * 1_000_000 };
}

/**
 * A canonical ISO date-time (as TimestampSchema gives), or undefined for an absent Timestamp;
 * `field` names it in the refusal, of a year outside 0000-9999 too.
 */
export function fromTimestamp(value: unknown, field: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  const { seconds, nanos } = value as Timestamp;
  const ms = Number(seconds) * 1000 + Math.floor(Number(nanos) / 1_000_000);
  const date = new Date(ms);
  if (!Number.isFinite(ms) || Number.isNaN(date.getTime())) throw invalidField(field, 'not a valid timestamp');
  const parsed = TimestampSchema.safeParse(date.toISOString());
  if (!parsed.success) throw invalidField(field, parsed.error.issues.map((i) => i.message).join('; '));
  return parsed.data;
}

export function invalidField(field: string, description: string): SvcError {
  return new SvcError('SVC-SYS-9002', `invalid request: ${field}: ${description}`, { fields: field }, [
    { field, description },
  ]);
}

/** google.protobuf.Value in the object form of proto-loader (`kind` names the member set). */
type ProtoValue = Record<string, unknown>;

export function toValue(value: unknown): ProtoValue {
  if (value === null || value === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value as Record<string, unknown>) };
}

export function toStruct(object: Record<string, unknown>): { fields: Record<string, ProtoValue> } {
  return { fields: Object.fromEntries(Object.entries(object).map(([key, value]) => [key, toValue(value)])) };
}

/** Which member of a google.protobuf.Value is set. */
function kindOf(v: ProtoValue): string | undefined {
  // `kind` names the member set when proto-loader decoded the value; a value made here has none.
  return typeof v.kind === 'string'
    ? v.kind
    : ['numberValue', 'stringValue', 'boolValue', 'listValue', 'structValue'].find(
        (key) => v[key] !== undefined && v[key] !== null,
      );
}

function fieldsOf(struct: unknown): Record<string, unknown> {
  return (struct as { fields?: Record<string, unknown> } | null)?.fields ?? {};
}

/** The fields of a Struct, or of a Value holding one. */
function structFieldsOf(node: unknown): Record<string, unknown> | undefined {
  if (typeof node !== 'object' || node === null) return undefined;
  const v = node as ProtoValue;
  if ('fields' in v) return fieldsOf(v);
  return kindOf(v) === 'structValue' ? fieldsOf(v.structValue) : undefined;
}

/** The children of a Struct (its fields) or of a Value (a list's items, a struct's fields). */
function protoChildren(node: unknown): unknown[] | undefined {
  const fields = structFieldsOf(node);
  if (fields !== undefined) return Object.values(fields);
  const v = node as ProtoValue | null;
  if (v !== null && typeof v === 'object' && kindOf(v) === 'listValue')
    return (v.listValue as { values?: unknown[] } | null)?.values ?? [];
  return undefined;
}

/**
 * Refuses a Struct or Value of more than MAX_JSON_VALUES values (SVC-SYS-9009), nested deeper
 * than MAX_METADATA_DEPTH or holding a key `__proto__` (SVC-SYS-9002), naming `field`, before it
 * is converted: the conversion recurses and costs per value, and a `__proto__` key, which REST's
 * JSON parser refuses, would be dropped or renamed on its way to the store.
 */
function checkBounded(value: unknown, field: string): void {
  const children = (node: unknown): unknown[] | undefined => {
    if (Object.hasOwn(structFieldsOf(node) ?? {}, '__proto__'))
      throw invalidField(field, 'holds a key named __proto__, which is not accepted');
    return protoChildren(node);
  };
  const excess = jsonExcess(value, children, MAX_JSON_VALUES, MAX_METADATA_DEPTH);
  if (excess === 'depth') throw invalidField(field, `must nest at most ${MAX_METADATA_DEPTH} levels deep`);
  if (excess === 'values') throw tooManyValues(field, MAX_JSON_VALUES);
}

function jsonOfValue(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  const v = value as ProtoValue;
  switch (kindOf(v)) {
    case 'numberValue':
      return v.numberValue;
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'listValue':
      return ((v.listValue as { values?: unknown[] } | null)?.values ?? []).map(jsonOfValue);
    case 'structValue':
      return jsonOfStruct(v.structValue);
    default:
      return null;
  }
}

function jsonOfStruct(struct: unknown): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fieldsOf(struct)).map(([key, value]) => [key, jsonOfValue(value)]));
}

/** A request's google.protobuf.Value as JSON; `field` names it when it is too large or deep. */
export function fromValue(value: unknown, field: string): unknown {
  checkBounded(value, field);
  return jsonOfValue(value);
}

/** A request's google.protobuf.Struct as JSON; `field` names it when it is too large or deep. */
export function fromStruct(struct: unknown, field: string): Record<string, unknown> {
  checkBounded(struct, field);
  return jsonOfStruct(struct);
}

/** A proto3 string where empty means absent. */
export function present(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** An enum name less its prefix, or undefined for `<PREFIX>UNSPECIFIED`. */
export function enumValue(value: unknown, prefix: string): string | undefined {
  if (typeof value !== 'string' || value === `${prefix}UNSPECIFIED`) return undefined;
  return value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

/** A required id of the request (a path variable over HTTP), bounded like a REST path id. */
export function requiredId(request: Record<string, unknown>, field: string): string {
  const value = present(request[field]);
  if (value === undefined) throw invalidField(field, 'required');
  const parsed = PathIdSchema.safeParse(value);
  if (!parsed.success) throw invalidField(field, parsed.error.issues.map((i) => i.message).join('; '));
  return parsed.data;
}
