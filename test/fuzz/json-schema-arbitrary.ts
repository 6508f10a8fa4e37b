import fc from 'fast-check';

/**
 * fast-check arbitraries from JSON Schema, for the subset an OpenAPI 3.1 document made by
 * zod-openapi uses: type (one or a list), enum, const, anyOf, properties / required /
 * additionalProperties / propertyNames, items / minItems / maxItems, minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum, minLength / maxLength, pattern and the formats uuid,
 * date-time and uri; `examples` are favoured where given. `validValue` draws values the schema accepts; `invalidValue` draws values
 * near it that break one of its rules (callers that need certainty check with a validator).
 */
export type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  examples?: unknown[];
};

/** Values to favour for named properties (ids of real resources), so calls reach existing ones. */
export type Pools = Readonly<Record<string, readonly unknown[]>>;

const JSON_TYPES = ['string', 'integer', 'number', 'boolean', 'object', 'array', 'null'] as const;
/** Generated strings stay short unless the schema asks for length; bounds are probed explicitly. */
const SHORT = 24;

function typesOf(schema: JsonSchema): string[] {
  if (schema.type === undefined) return [];
  return Array.isArray(schema.type) ? schema.type : [schema.type];
}

function safeInteger(min: number, max: number): fc.Arbitrary<number> {
  const lo = Math.max(Math.ceil(min), Number.MIN_SAFE_INTEGER);
  const hi = Math.min(Math.floor(max), Number.MAX_SAFE_INTEGER);
  return fc.oneof(
    { weight: 4, arbitrary: fc.bigInt(BigInt(lo), BigInt(hi)).map(Number) },
    { weight: 1, arbitrary: fc.constantFrom(lo, hi) },
  );
}

function lowerBound(schema: JsonSchema): { value: number; excluded: boolean } {
  if (schema.exclusiveMinimum !== undefined) return { value: schema.exclusiveMinimum, excluded: true };
  return { value: schema.minimum ?? -1e12, excluded: false };
}

function upperBound(schema: JsonSchema): { value: number; excluded: boolean } {
  if (schema.exclusiveMaximum !== undefined) return { value: schema.exclusiveMaximum, excluded: true };
  return { value: schema.maximum ?? 1e12, excluded: false };
}

function validString(schema: JsonSchema): fc.Arbitrary<string> {
  const min = schema.minLength ?? 0;
  const max = schema.maxLength ?? Math.max(min, SHORT);
  const fits = (s: string) => s.length >= min && s.length <= max;
  if (schema.format === 'uuid') return fc.uuid();
  if (schema.format === 'date-time')
    return fc
      .date({ min: new Date('1971-01-01T00:00:00Z'), max: new Date('2199-12-31T00:00:00Z'), noInvalidDate: true })
      .map((d) => d.toISOString());
  // Loopback addresses nothing listens on: a generated webhook must not reach out of the machine.
  if (schema.format === 'uri') return fc.constantFrom('http://127.0.0.1:9/hook', 'https://localhost:9/alerts?x=1');
  if (schema.pattern !== undefined) return fc.stringMatching(new RegExp(schema.pattern)).filter(fits);
  const text = fc.string({ unit: 'binary', minLength: min, maxLength: Math.min(max, Math.max(min, SHORT)) });
  const longest = fc.string({ unit: 'grapheme-ascii', minLength: max, maxLength: max });
  return fc.oneof({ weight: 5, arbitrary: text.filter(fits) }, { weight: 1, arbitrary: longest });
}

function validObject(schema: JsonSchema, pools: Pools): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const shape: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, property] of Object.entries(properties)) shape[name] = validValue(property, pools, name);
  const declared = fc.record(shape, { requiredKeys: (schema.required ?? []).filter((k) => k in properties) });
  const extra = schema.additionalProperties;
  if (extra === undefined || extra === false || Object.keys(properties).length > 0) return declared;
  // A map (metadata, tags, context): keys are free, values follow the schema or are any JSON.
  const values = extra === true || Object.keys(extra).length === 0 ? fc.jsonValue({ maxDepth: 2 }) : validValue(extra);
  return fc.dictionary(fc.string({ maxLength: 12 }), values, { maxKeys: 5 });
}

/** Values the schema accepts. `name` is the property the value is for, looked up in `pools`. */
export function validValue(schema: JsonSchema, pools: Pools = {}, name?: string): fc.Arbitrary<unknown> {
  const own = schemaValue(schema, pools);
  const pool = name === undefined ? undefined : pools[name];
  if (pool === undefined || pool.length === 0) return own;
  return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...pool) }, { weight: 1, arbitrary: own });
}

function schemaValue(schema: JsonSchema, pools: Pools): fc.Arbitrary<unknown> {
  if (schema.examples !== undefined && schema.examples.length > 0) {
    // Free text that names its accepted values in examples (enums any case, gRPC names): use them.
    const { examples, ...rest } = schema;
    return fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...examples) },
      { weight: 1, arbitrary: schemaValue(rest, pools) },
    );
  }
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives !== undefined) return fc.oneof(...alternatives.map((s) => validValue(s, pools)));
  const types = typesOf(schema);
  if (types.length > 1) return fc.oneof(...types.map((type) => validValue({ ...schema, type }, pools)));
  switch (types[0]) {
    case 'string':
      return validString(schema);
    case 'integer': {
      const lo = lowerBound(schema);
      const hi = upperBound(schema);
      return safeInteger(lo.excluded ? lo.value + 1 : lo.value, hi.excluded ? hi.value - 1 : hi.value);
    }
    case 'number': {
      const lo = lowerBound(schema);
      const hi = upperBound(schema);
      return fc.oneof(
        fc.double({
          min: lo.value,
          max: hi.value,
          minExcluded: lo.excluded,
          maxExcluded: hi.excluded,
          noNaN: true,
          noDefaultInfinity: true,
        }),
        safeInteger(lo.excluded ? lo.value + 1 : lo.value, hi.excluded ? hi.value - 1 : hi.value),
      );
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(schema.items === undefined ? fc.jsonValue({ maxDepth: 1 }) : validValue(schema.items, pools), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 4, Math.max(schema.minItems ?? 0, 4)),
      });
    case 'object':
      return validObject(schema, pools);
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A value of another JSON type than any the schema allows. */
function wrongType(schema: JsonSchema): fc.Arbitrary<unknown> {
  const allowed = new Set(typesOf(schema));
  if (allowed.has('integer')) allowed.add('number');
  const samples: Record<string, fc.Arbitrary<unknown>> = {
    string: fc.string({ maxLength: 8 }),
    integer: fc.integer(),
    number: fc.double({ noNaN: true, noDefaultInfinity: true }),
    boolean: fc.boolean(),
    object: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
    array: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
    null: fc.constant(null),
  };
  const others = JSON_TYPES.filter((t) => !allowed.has(t) && !(t === 'integer' && allowed.has('number')));
  return fc.oneof(...others.map((t) => samples[t]!));
}

/** Values just past the schema's own limits: bounds, lengths, patterns, items, unknown keys. */
function brokenRule(schema: JsonSchema, pools: Pools): fc.Arbitrary<unknown>[] {
  const broken: fc.Arbitrary<unknown>[] = [];
  const types = typesOf(schema);
  if (types.includes('integer') || types.includes('number')) {
    const lo = lowerBound(schema);
    const hi = upperBound(schema);
    if (schema.minimum !== undefined || schema.exclusiveMinimum !== undefined)
      broken.push(fc.constantFrom(lo.excluded ? lo.value : lo.value - 1, -1e308, Number.MIN_SAFE_INTEGER));
    if (schema.maximum !== undefined || schema.exclusiveMaximum !== undefined)
      broken.push(fc.constantFrom(hi.excluded ? hi.value : hi.value + 1, 1.7976931348623157e308, 2 ** 60));
    if (types.includes('integer') && !types.includes('number')) broken.push(fc.constantFrom(0.5, 1.25, 1e-7));
  }
  if (types.includes('string')) {
    if (schema.maxLength !== undefined)
      broken.push(
        fc.string({ unit: 'grapheme-ascii', minLength: schema.maxLength + 1, maxLength: schema.maxLength + 40 }),
      );
    if (schema.minLength !== undefined && schema.minLength > 0) broken.push(fc.constant(''));
    if (schema.pattern !== undefined || schema.format !== undefined)
      broken.push(fc.constantFrom('not valid!', '2026-13-45T99:99:99Z', 'x'.repeat(300), '\u0000', ' '));
  }
  if (schema.enum !== undefined) broken.push(fc.constantFrom('NOT_A_MEMBER', 'no such value', ''));
  if (types.includes('array')) {
    if (schema.maxItems !== undefined)
      broken.push(
        fc.array(schema.items === undefined ? fc.constant(null) : validValue(schema.items, pools), {
          minLength: schema.maxItems + 1,
          maxLength: schema.maxItems + 3,
        }),
      );
    if (schema.minItems !== undefined && schema.minItems > 0) broken.push(fc.constant([]));
    if (schema.items !== undefined)
      broken.push(fc.array(invalidValue(schema.items, pools), { minLength: 1, maxLength: 2 }));
  }
  if (types.includes('object') && schema.properties !== undefined) {
    const properties = Object.keys(schema.properties);
    const valid = validObject(schema, pools);
    if ((schema.required ?? []).length > 0)
      broken.push(
        fc.tuple(valid, fc.constantFrom(...schema.required!)).map(([value, key]) => {
          const copy = { ...value };
          delete copy[key];
          return copy;
        }),
      );
    if (schema.additionalProperties === false) broken.push(valid.map((value) => ({ ...value, unexpected_field: 1 })));
    if (properties.length > 0)
      broken.push(
        fc
          .constantFrom(...properties)
          .chain((key) => fc.tuple(valid, fc.constant(key), invalidValue(schema.properties![key]!, pools)))
          .map(([value, key, bad]) => ({ ...value, [key]: bad })),
      );
  }
  return broken;
}

/** Values the schema (most likely) refuses: a wrong type, or one rule broken. */
export function invalidValue(schema: JsonSchema, pools: Pools = {}): fc.Arbitrary<unknown> {
  if (schema.anyOf !== undefined || schema.oneOf !== undefined) {
    const alternatives = schema.anyOf ?? schema.oneOf ?? [];
    return fc.oneof(...alternatives.map((s) => invalidValue(s, pools)));
  }
  const broken = brokenRule(schema, pools);
  const typed = typesOf(schema).length > 0 ? [wrongType(schema)] : [];
  const all = [...broken, ...typed];
  return all.length === 0 ? fc.constant(undefined) : fc.oneof(...all);
}
