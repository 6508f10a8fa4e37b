import type { AnyDefinition, MethodDefinition, PackageDefinition, ServiceDefinition } from '@grpc/proto-loader';
import { z } from 'zod';
import { SvcError } from '../../core/errors/index.ts';

/** One HTTP binding of a gRPC method, read from its `google.api.http` option. */
export interface HttpRule {
  /** Fully qualified service name, such as `svc.policy.v1.PolicyService`. */
  readonly service: string;
  readonly method: string;
  /** `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, or a custom pattern's kind as written. */
  readonly verb: string;
  /** Path template; `{policy.policy_id}` binds a (nested) request field. */
  readonly path: string;
  /** `*` (the whole request), the top-level request field the body fills, or null (no body). */
  readonly body: string | null;
}

const HTTP_OPTION = '(google.api.http)';
const STANDARD_VERBS = ['get', 'put', 'post', 'delete', 'patch'] as const;

// Strict: a key this reader does not convey (response_body, selector) is refused rather than
// dropped, so a gateway built on the rules never serves a binding differently from its contract.
const PatternSchema = z.strictObject({
  get: z.string().optional(),
  put: z.string().optional(),
  post: z.string().optional(),
  delete: z.string().optional(),
  patch: z.string().optional(),
  custom: z.strictObject({ kind: z.string().min(1), path: z.string() }).optional(),
  body: z.string().optional(),
});
type Pattern = z.infer<typeof PatternSchema>;

const HttpOptionSchema = PatternSchema.extend({
  // protobufjs gives one binding as an object and several as an array.
  additional_bindings: z.union([PatternSchema, z.array(PatternSchema)]).optional(),
});

const RequestDescriptorSchema = z.object({ field: z.array(z.object({ name: z.string() })).default([]) });

const PATH_VARIABLE = /\{([^}=]+)(?:=[^}]*)?\}/g;

/**
 * Lists the HTTP bindings of every method in a loaded definition (additional bindings as rules
 * of their own); methods without the option have none. Throws SVC-SYS-9007 naming the method
 * when a binding is malformed: not exactly one verb, a path not starting with `/`, or a path
 * variable or body naming no field of the request.
 */
export function listHttpRules(definition: PackageDefinition): HttpRule[] {
  const rules: HttpRule[] = [];
  for (const [service, entry] of Object.entries(definition)) {
    if (!isService(entry)) continue;
    for (const [method, methodDefinition] of Object.entries(entry)) {
      const option = methodDefinition.options[HTTP_OPTION];
      if (option !== undefined) rules.push(...bindingsOf(service, method, methodDefinition, option));
    }
  }
  return rules;
}

function isService(entry: AnyDefinition): entry is ServiceDefinition {
  return !('format' in entry);
}

function bindingsOf(
  service: string,
  method: string,
  definition: MethodDefinition<object, object>,
  option: unknown,
): HttpRule[] {
  const invalid = (why: string) =>
    new SvcError('SVC-SYS-9007', `${service}.${method}: invalid google.api.http option: ${why}`, { service, method });
  const parsed = HttpOptionSchema.safeParse(option);
  if (!parsed.success) {
    throw invalid(parsed.error.issues.map((i) => `${i.path.join('.') || '(option)'}: ${i.message}`).join('; '));
  }
  const { additional_bindings: additional, ...primary } = parsed.data;
  const fields = new Set(RequestDescriptorSchema.parse(definition.requestType.type).field.map((f) => f.name));
  return [primary, ...(additional === undefined ? [] : [additional].flat())].map((pattern) => {
    const { verb, path } = verbAndPath(pattern, invalid);
    if (!path.startsWith('/')) throw invalid(`path "${path}" does not start with /`);
    for (const [, variable = ''] of path.matchAll(PATH_VARIABLE)) {
      const top = variable.split('.')[0] ?? '';
      if (!fields.has(top)) throw invalid(`path variable {${variable}} names no request field`);
    }
    const body = pattern.body === undefined || pattern.body === '' ? null : pattern.body;
    if (body !== null && body !== '*' && !fields.has(body)) throw invalid(`body "${body}" names no request field`);
    return { service, method, verb, path, body };
  });
}

function verbAndPath(pattern: Pattern, invalid: (why: string) => SvcError): { verb: string; path: string } {
  const found: { verb: string; path: string }[] = [];
  for (const verb of STANDARD_VERBS) {
    const path = pattern[verb];
    if (path !== undefined) found.push({ verb: verb.toUpperCase(), path });
  }
  if (pattern.custom !== undefined) found.push({ verb: pattern.custom.kind, path: pattern.custom.path });
  const [only] = found;
  if (only === undefined || found.length > 1) {
    throw invalid(`a binding needs exactly one of get, put, post, delete, patch, custom; found ${found.length}`);
  }
  return only;
}
