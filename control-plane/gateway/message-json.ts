import type { PackageDefinition } from '@grpc/proto-loader';
import { z } from 'zod';
import {
  jsonExcess,
  MAX_JSON_VALUES,
  MAX_METADATA_DEPTH,
  parsedChildren,
  TimestampSchema,
} from '../../core/domain/index.ts';
import { TOO_LARGE } from '../../core/errors/index.ts';

/**
 * The proto3 JSON mapping of the contracts' messages, read from the loaded descriptors: zod
 * schemas that parse JSON (or query-string values) into the object form @grpc/proto-loader
 * gives handlers, schemas of the JSON answers (for the OpenAPI document), and the conversion of
 * an answer to JSON. Field names are as written (`snake_case`); `lowerCamelCase` is accepted on
 * input, as proto3 JSON parsers do.
 */

interface FieldDescriptor {
  name: string;
  label: string;
  type: string;
  typeName?: string;
}
interface MessageDescriptor {
  name: string;
  field: FieldDescriptor[];
  nestedType?: MessageDescriptor[];
  options?: { mapEntry?: boolean } | null;
}

type Resolved =
  | { kind: 'scalar'; type: string }
  | { kind: 'enum'; values: [string, ...string[]] }
  | { kind: 'message'; name: string }
  | { kind: 'map'; value: Resolved };

const INTEGER = /^-?\d{1,19}$/;
const MAX_INT32 = 2 ** 31 - 1;

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function timestampFromIso(iso: string): { seconds: string; nanos: number } {
  const ms = Date.parse(iso);
  return { seconds: String(Math.floor(ms / 1000)), nanos: (((ms % 1000) + 1000) % 1000) * 1_000_000 };
}

function valueFromJson(value: unknown): Record<string, unknown> {
  if (value === null) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(valueFromJson) } };
  return { structValue: structFromJson(value as Record<string, unknown>) };
}

function structFromJson(object: Record<string, unknown>) {
  return { fields: Object.fromEntries(Object.entries(object).map(([k, v]) => [k, valueFromJson(v)])) };
}

function jsonFromValue(value: unknown): unknown {
  const v = (value ?? {}) as Record<string, unknown>;
  if (v.structValue !== undefined && v.structValue !== null) return jsonFromStruct(v.structValue);
  if (v.listValue !== undefined && v.listValue !== null)
    return ((v.listValue as { values?: unknown[] }).values ?? []).map(jsonFromValue);
  for (const key of ['numberValue', 'stringValue', 'boolValue'])
    if (v[key] !== undefined && v[key] !== null) return v[key];
  return null;
}

function jsonFromStruct(struct: unknown): Record<string, unknown> {
  const fields = (struct as { fields?: Record<string, unknown> } | null)?.fields ?? {};
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, jsonFromValue(v)]));
}

/**
 * Refuses free-form JSON with more values than MAX_JSON_VALUES (413) or nested deeper than
 * MAX_METADATA_DEPTH (400) before it is converted value by value to the protobuf form: the
 * conversion, encoding and decoding of a 1 MiB body of small values had held the event loop for
 * seconds, and a deep one overflowed the stack.
 */
function boundedJson(value: unknown, context: z.RefinementCtx): void {
  const excess = jsonExcess(value, parsedChildren, MAX_JSON_VALUES, MAX_METADATA_DEPTH);
  if (excess === 'values')
    context.addIssue({ code: 'custom', message: `holds more than ${MAX_JSON_VALUES} values`, params: TOO_LARGE });
  if (excess === 'depth')
    context.addIssue({ code: 'custom', message: `must nest at most ${MAX_METADATA_DEPTH} levels deep` });
}

const WELL_KNOWN_INPUT: Record<string, () => z.ZodType> = {
  'google.protobuf.Timestamp': () => TimestampSchema.transform(timestampFromIso),
  'google.protobuf.Struct': () => z.record(z.string(), z.unknown()).superRefine(boundedJson).transform(structFromJson),
  'google.protobuf.Value': () => z.unknown().superRefine(boundedJson).transform(valueFromJson),
  'google.protobuf.FieldMask': () =>
    z
      .string()
      .max(2000)
      .transform((s) => ({
        paths: s
          .split(',')
          .map((p) => p.trim())
          .filter((p) => p !== '')
          .map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)),
      })),
};

const WELL_KNOWN_OUTPUT: Record<string, () => z.ZodType> = {
  'google.protobuf.Timestamp': () => TimestampSchema,
  'google.protobuf.Struct': () => z.record(z.string(), z.unknown()),
  'google.protobuf.Value': () => z.unknown(),
  'google.protobuf.FieldMask': () => z.string(),
};

export class MessageJson {
  private readonly definition: PackageDefinition;
  private readonly inputs = new Map<string, z.ZodType>();
  private readonly outputs = new Map<string, z.ZodType>();

  constructor(definition: PackageDefinition) {
    this.definition = definition;
  }

  private descriptor(name: string): MessageDescriptor {
    const entry = this.definition[name];
    if (entry === undefined || !('format' in entry) || entry.format !== 'Protocol Buffer 3 DescriptorProto')
      throw new Error(`no message ${name}`);
    return entry.type as MessageDescriptor;
  }

  private enumValues(name: string): [string, ...string[]] {
    const entry = this.definition[name];
    if (entry === undefined || !('format' in entry)) throw new Error(`no enum ${name}`);
    const values = (entry.type as { value: Array<{ name: string }> }).value.map((v) => v.name);
    return values as [string, ...string[]];
  }

  /** A field's type, its relative type name resolved from the message's scope outwards. */
  private resolve(message: string, descriptor: MessageDescriptor, field: FieldDescriptor): Resolved {
    if (field.type !== 'TYPE_MESSAGE' && field.type !== 'TYPE_ENUM') return { kind: 'scalar', type: field.type };
    const ref = (field.typeName ?? '').replace(/^\./, '');
    const entry = descriptor.nestedType?.find((n) => n.name === ref && n.options?.mapEntry === true);
    if (entry !== undefined) {
      const value = entry.field.find((f) => f.name === 'value') as FieldDescriptor;
      return { kind: 'map', value: this.resolve(message, descriptor, value) };
    }
    let target: string | undefined;
    for (let scope = message; scope !== '' && target === undefined;) {
      if (Object.hasOwn(this.definition, `${scope}.${ref}`)) target = `${scope}.${ref}`;
      scope = scope.includes('.') ? scope.slice(0, scope.lastIndexOf('.')) : '';
    }
    target ??= ref;
    return field.type === 'TYPE_ENUM'
      ? { kind: 'enum', values: this.enumValues(target) }
      : { kind: 'message', name: target };
  }

  private scalarInput(type: string, query: boolean): z.ZodType {
    switch (type) {
      case 'TYPE_BOOL':
        return query ? z.enum(['true', 'false']).transform((v) => v === 'true') : z.boolean();
      case 'TYPE_INT32':
      case 'TYPE_SINT32':
      case 'TYPE_UINT32':
        return z.coerce.number().int().min(-MAX_INT32).max(MAX_INT32);
      case 'TYPE_INT64':
      case 'TYPE_SINT64':
      case 'TYPE_UINT64':
        return z
          .union([z.int(), z.string().regex(INTEGER, 'must be an integer')])
          .transform((v) => String(v))
          .refine((v) => Number.isSafeInteger(Number(v)), 'must be an integer within ±2^53');
      case 'TYPE_DOUBLE':
      case 'TYPE_FLOAT':
        return query ? z.coerce.number().refine(Number.isFinite, 'must be a finite number') : z.number();
      default:
        return z.string();
    }
  }

  private typeInput(message: string, descriptor: MessageDescriptor, field: FieldDescriptor, query: boolean): z.ZodType {
    const resolved = this.resolve(message, descriptor, field);
    const one = (r: Resolved): z.ZodType => {
      if (r.kind === 'scalar') return this.scalarInput(r.type, query);
      if (r.kind === 'enum') return z.enum(r.values);
      if (r.kind === 'map') return z.record(z.string(), one(r.value));
      return this.input(r.name, query);
    };
    const single = one(resolved);
    if (field.label !== 'LABEL_REPEATED' || resolved.kind === 'map') return single;
    // A repeated query parameter arrives as one value when given once.
    return query
      ? z.preprocess((v: unknown) => (Array.isArray(v) ? (v as unknown[]) : [v]), z.array(single))
      : z.array(single);
  }

  /**
   * The schema of `name` as JSON (or query values when `query`): unknown fields are refused,
   * `lowerCamelCase` names are read as their `snake_case` field, and the output is the object
   * form handlers take. `omit` leaves fields out (those a path variable or another part fills).
   */
  /**
   * The query parameters of `name`'s fields (less `omit`), by their names and their
   * `lowerCamelCase` aliases: a plain object of optional parameters, as the OpenAPI document
   * lists them. `fromQuery` folds the aliases onto the fields.
   */
  query(name: string, omit: readonly string[]): z.ZodObject {
    const descriptor = this.descriptor(name);
    const shape: Record<string, z.ZodType> = {};
    for (const field of descriptor.field) {
      if (omit.includes(field.name)) continue;
      const schema = this.typeInput(name, descriptor, field, true).optional();
      shape[field.name] = schema;
      if (camel(field.name) !== field.name) shape[camel(field.name)] = schema;
    }
    return z.strictObject(shape);
  }

  /** Query values parsed by `query(name)` as the fields of the message. */
  fromQuery(name: string, values: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const field of this.descriptor(name).field) {
      const value = values[field.name] ?? values[camel(field.name)];
      if (value !== undefined) out[field.name] = value;
    }
    return out;
  }

  input(name: string, query = false, omit: readonly string[] = []): z.ZodType {
    const known = WELL_KNOWN_INPUT[name];
    if (known !== undefined) return known();
    const key = `${name}|${String(query)}|${omit.join(',')}`;
    const cached = this.inputs.get(key);
    if (cached !== undefined) return cached;
    const schema = z.lazy(() => {
      const descriptor = this.descriptor(name);
      const fields = descriptor.field.filter((f) => !omit.includes(f.name));
      const shape = Object.fromEntries(
        fields.map((f) => [f.name, this.typeInput(name, descriptor, f, query).optional()]),
      );
      const aliases = new Map(fields.map((f) => [camel(f.name), f.name]));
      return z.preprocess((raw) => {
        if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw;
        const renamed: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(raw)) {
          const field = aliases.get(k) ?? k;
          if (!Object.hasOwn(renamed, field) || field === k) renamed[field] = v;
        }
        return renamed;
      }, z.strictObject(shape));
    });
    this.inputs.set(key, schema);
    return schema;
  }

  private scalarOutput(type: string): z.ZodType {
    if (type === 'TYPE_BOOL') return z.boolean();
    if (type.includes('64')) return z.string();
    if (type.includes('INT32') || type === 'TYPE_DOUBLE' || type === 'TYPE_FLOAT') return z.number();
    return z.string();
  }

  /** The schema of `name`'s JSON form, as answers carry it (for the OpenAPI document). */
  output(name: string): z.ZodType {
    const known = WELL_KNOWN_OUTPUT[name];
    if (known !== undefined) return known();
    const cached = this.outputs.get(name);
    if (cached !== undefined) return cached;
    const schema = z.lazy(() => {
      const descriptor = this.descriptor(name);
      const one = (r: Resolved): z.ZodType => {
        if (r.kind === 'scalar') return this.scalarOutput(r.type);
        if (r.kind === 'enum') return z.enum(r.values);
        if (r.kind === 'map') return z.record(z.string(), one(r.value));
        return this.output(r.name);
      };
      return z.object(
        Object.fromEntries(
          descriptor.field.map((f) => {
            const resolved = this.resolve(name, descriptor, f);
            const single = one(resolved);
            return [
              f.name,
              (f.label === 'LABEL_REPEATED' && resolved.kind !== 'map' ? z.array(single) : single).optional(),
            ];
          }),
        ),
      );
    });
    this.outputs.set(name, schema);
    return schema;
  }

  /** An answer in its JSON form: Timestamps as RFC 3339, Structs as objects, absent messages left out. */
  toJson(name: string, value: unknown): unknown {
    if (value === null || value === undefined) return undefined;
    if (name === 'google.protobuf.Timestamp') {
      const { seconds, nanos } = value as { seconds: string | number; nanos: number };
      return new Date(Number(seconds) * 1000 + Math.floor(Number(nanos) / 1_000_000)).toISOString();
    }
    if (name === 'google.protobuf.Struct') return jsonFromStruct(value);
    if (name === 'google.protobuf.Value') return jsonFromValue(value);
    if (name === 'google.protobuf.FieldMask') return ((value as { paths?: string[] }).paths ?? []).join(',');
    const descriptor = this.descriptor(name);
    const record = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const field of descriptor.field) {
      const v = record[field.name];
      if (v === undefined || v === null) continue;
      const resolved = this.resolve(name, descriptor, field);
      const convert = (item: unknown, r: Resolved): unknown =>
        r.kind === 'message'
          ? this.toJson(r.name, item)
          : r.kind === 'scalar' && r.type.includes('64')
            ? String(item)
            : item;
      if (resolved.kind === 'map')
        out[field.name] = Object.fromEntries(
          Object.entries(v as Record<string, unknown>).map(([k, item]) => [k, convert(item, resolved.value)]),
        );
      else if (field.label === 'LABEL_REPEATED')
        out[field.name] = (v as unknown[]).map((item) => convert(item, resolved));
      else out[field.name] = convert(v, resolved);
    }
    return out;
  }
}
