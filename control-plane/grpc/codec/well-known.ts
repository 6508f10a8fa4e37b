import { PathIdSchema } from '../../../core/domain/index.ts';
import { SvcError } from '../../../core/errors/index.ts';

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

/** An ISO date-time, or undefined for an absent Timestamp; `field` names it in the refusal. */
export function fromTimestamp(value: unknown, field: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  const { seconds, nanos } = value as Timestamp;
  const ms = Number(seconds) * 1000 + Math.floor(Number(nanos) / 1_000_000);
  const date = new Date(ms);
  if (!Number.isFinite(ms) || Number.isNaN(date.getTime())) throw invalidField(field, 'not a valid timestamp');
  return date.toISOString();
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

export function fromValue(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  const v = value as ProtoValue;
  // `kind` names the member set when proto-loader decoded the value; a value made here has none.
  const kind =
    typeof v.kind === 'string'
      ? v.kind
      : ['numberValue', 'stringValue', 'boolValue', 'listValue', 'structValue'].find(
          (key) => v[key] !== undefined && v[key] !== null,
        );
  switch (kind) {
    case 'numberValue':
      return v.numberValue;
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'listValue':
      return ((v.listValue as { values?: unknown[] } | null)?.values ?? []).map(fromValue);
    case 'structValue':
      return fromStruct(v.structValue);
    default:
      return null;
  }
}

export function fromStruct(struct: unknown): Record<string, unknown> {
  const fields = (struct as { fields?: Record<string, unknown> } | null)?.fields ?? {};
  return Object.fromEntries(Object.entries(fields).map(([key, value]) => [key, fromValue(value)]));
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
