import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import { invalidValue, validValue, type JsonSchema, type Pools } from './json-schema-arbitrary.ts';
import type { RawAnswer, RawRequest, TenantFixture } from './rest-target.ts';

/** What the fuzz suites read of an OpenAPI 3.1 document. */
export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OpenApiOperation>>;
}

interface OpenApiParameter {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema: JsonSchema;
}

interface OpenApiOperation {
  operationId: string;
  security?: unknown[];
  parameters?: OpenApiParameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, { description: string; content?: Record<string, { schema?: JsonSchema }> }>;
}

export interface Operation extends OpenApiOperation {
  method: string;
  path: string;
}

export function operationsOf(doc: OpenApiDocument): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ ...operation, method: method.toUpperCase(), path })),
  );
}

/** Who calls: the headers that authenticate it (and name the tenant acted for). */
export interface Principal {
  name: string;
  headers: Record<string, string>;
}

/** Ids of real resources by the name of the field or parameter that carries them. */
export function poolsOf(home: TenantFixture, other: TenantFixture): Pools {
  return {
    budget_id: [...home.budgetIds, ...other.budgetIds],
    envelope_id: [...home.envelopeIds, ...other.envelopeIds],
    policy_id: [...home.policyIds, ...other.policyIds],
    key_id: [...home.keyIds, ...other.keyIds],
    tenant_id: [home.tenantId, other.tenantId, 'system', 'no-such-tenant'],
    action: ['tool:shell', 'tool:deploy', 'execution:start', 'llm:call'],
    // Rules the policy compiler accepts (random ones rarely are); none touches execution:start.
    rules: [
      [{ action: 'tool:fuzz', effect: 'deny' }],
      [{ action: 'tool:*', effect: 'warn', conditions: [{ field: 'tool_name', operator: 'eq', value: 'rm' }] }],
      [{ action: 'llm:*', decision: 'REQUIRE_APPROVAL', message: 'ask first' }],
    ],
  };
}

/** A request generated from an operation, with whether the document says its inputs are valid. */
export interface GeneratedRequest {
  request: RawRequest;
  /** The inputs the document's schemas refuse (empty when it accepts them all). */
  invalid: string[];
}

const ajvOptions = { strict: false, allErrors: true } as const;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** JSON Schema validation of bodies and parameters against the document, compiled once each. */
export class SchemaChecker {
  private readonly bodies = addFormats(new Ajv2020(ajvOptions));
  // A query value is text; one value of an array parameter (`?keys=a`) is an array of one.
  private readonly params = addFormats(new Ajv2020({ ...ajvOptions, coerceTypes: 'array' }));
  private readonly cache = new WeakMap<object, ValidateFunction>();
  private readonly paramCache = new WeakMap<object, ValidateFunction>();

  errors(schema: JsonSchema, value: unknown): string | null {
    let validate = this.cache.get(schema);
    if (validate === undefined) {
      validate = this.bodies.compile(schema);
      this.cache.set(schema, validate);
    }
    return validate(value) ? null : this.bodies.errorsText(validate.errors);
  }

  /** A query or path value as the wire carries it (text), coerced as the document's type asks. */
  paramErrors(schema: JsonSchema, value: string): string | null {
    let validate = this.paramCache.get(schema);
    if (validate === undefined) {
      validate = this.params.compile({ type: 'object', properties: { value: schema }, required: ['value'] });
      this.paramCache.set(schema, validate);
    }
    return validate({ value }) ? null : this.params.errorsText(validate.errors);
  }
}

function asText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Path values the router must cope with: real ids, unknown ids, over-long and odd ones. */
function pathValue(parameter: OpenApiParameter, pools: Pools): fc.Arbitrary<string> {
  const real = pools[parameter.name] ?? [];
  return fc.oneof(
    { weight: 4, arbitrary: real.length > 0 ? fc.constantFrom(...real.map(String)) : fc.uuid() },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 1, arbitrary: validValue(parameter.schema).map(asText) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 30 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 101, maxLength: 400 }) },
  );
}

/**
 * Requests for one operation as `principal`: each input drawn valid or invalid from the
 * document's schema, so both what it accepts and what it refuses are exercised.
 */
/**
 * The control plane's default `body_limit_bytes`. A schema's lists allow larger bodies (6 MB of
 * `calls` for an overrun prediction); the server answers those 413 and, once it stops draining,
 * closes the connection while the client may still be writing, which fetch reports as a failed
 * request instead of the answer. test/control-plane/oversized-body.test.ts covers that path.
 */
const MAX_BODY_BYTES = 1_048_576;

export function requestsFor(
  op: Operation,
  principal: Principal,
  pools: Pools,
  checker: SchemaChecker,
): fc.Arbitrary<GeneratedRequest> {
  const parameters = op.parameters ?? [];
  const pathParams = parameters.filter((p) => p.in === 'path');
  const queryParams = parameters.filter((p) => p.in === 'query');
  const bodySchema = op.requestBody?.content['application/json']?.schema;

  const path = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, pathValue(p, pools)])));
  const query = fc.record(
    Object.fromEntries(
      queryParams.map((p) => [
        p.name,
        fc
          .oneof(
            { weight: 3, arbitrary: validValue(p.schema, pools, p.name) },
            { weight: 1, arbitrary: invalidValue(p.schema, pools) },
          )
          .map(asText),
      ]),
    ),
    { requiredKeys: queryParams.filter((p) => p.required === true).map((p) => p.name) },
  );
  const body: fc.Arbitrary<unknown> =
    bodySchema === undefined
      ? fc.constant(undefined)
      : fc.oneof(
          { weight: 3, arbitrary: validValue(bodySchema, pools) },
          { weight: 2, arbitrary: invalidValue(bodySchema, pools) },
          ...(op.requestBody?.required === true ? [] : [{ weight: 1, arbitrary: fc.constant(undefined) }]),
        );

  return fc
    .record({ path, query, body })
    .map(({ path: pathValues, query: queryValues, body: bodyValue }) => {
      const invalid: string[] = [];
      let url = op.path;
      for (const p of pathParams) {
        const value = pathValues[p.name]!;
        if (checker.paramErrors(p.schema, value) !== null) invalid.push(`path ${p.name}`);
        url = url.replace(`{${p.name}}`, encodeURIComponent(value));
      }
      const search = new URLSearchParams();
      for (const p of queryParams) {
        const value = (queryValues as Record<string, string | undefined>)[p.name];
        if (value === undefined) continue;
        if (checker.paramErrors(p.schema, value) !== null) invalid.push(`query ${p.name}`);
        search.set(p.name, value);
      }
      const headers: Record<string, string> = { ...principal.headers };
      let text: string | undefined;
      if (bodyValue !== undefined) {
        text = JSON.stringify(bodyValue);
        headers['content-type'] = 'application/json';
        if (bodySchema !== undefined && checker.errors(bodySchema, bodyValue) !== null) invalid.push('body');
      } else if (op.requestBody?.required === true) invalid.push('body');
      const qs = search.toString();
      return {
        request: {
          method: op.method,
          url: qs === '' ? url : `${url}?${qs}`,
          headers,
          ...(text !== undefined ? { body: text } : {}),
        },
        invalid,
      };
    })
    .filter(({ request }) => request.body === undefined || Buffer.byteLength(request.body) <= MAX_BODY_BYTES);
}

/**
 * What an answer breaks of the document: a 5xx, a status the operation does not document, a
 * content type it does not name, or a body its schema for that status refuses.
 */
export function contractProblems(op: Operation, answer: RawAnswer, checker: SchemaChecker): string[] {
  const problems: string[] = [];
  if (answer.status >= 500) problems.push(`server error ${answer.status}: ${answer.text.slice(0, 300)}`);
  const status = String(answer.status);
  const documented = op.responses[status] ?? op.responses[`${status[0]}XX`] ?? op.responses.default;
  if (documented === undefined) {
    problems.push(`status ${status} is not documented (documented: ${Object.keys(op.responses).join(', ')})`);
    return problems;
  }
  if (documented.content === undefined) return problems;
  const media = answer.contentType.split(';')[0]!.trim().toLowerCase();
  const content = documented.content[media];
  if (content === undefined) {
    problems.push(`content type ${media || '(none)'} is not among ${Object.keys(documented.content).join(', ')}`);
    return problems;
  }
  if (content.schema === undefined) return problems;
  const value = media === 'application/json' ? answer.json : answer.text;
  if (media === 'application/json' && answer.json === undefined)
    problems.push(`body is not JSON: ${answer.text.slice(0, 200)}`);
  else {
    const errors = checker.errors(content.schema, value);
    if (errors !== null)
      problems.push(`body breaks the ${status} schema: ${errors}; body ${answer.text.slice(0, 400)}`);
  }
  return problems;
}
