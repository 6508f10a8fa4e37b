import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, ErrorBodySchema, type SvcCode } from '../../core/errors/index.ts';
import {
  contractProblems,
  operationsOf,
  poolsOf,
  requestsFor,
  SchemaChecker,
  type Operation,
  type OpenApiDocument,
  type Principal,
} from './openapi-requests.ts';
import { ROOT_KEY, startRestTarget, type RawAnswer, type RawRequest, type RestTarget } from './rest-target.ts';
import { fuzzParameters } from './seed.ts';

/**
 * The REST surface of a spawned control plane under generated bodies, queries and headers on
 * every route: no 5xx, no crash, every refusal an SVC error in the documented body, and nothing
 * written by a refused request.
 */
let target: RestTarget;
let operations: Operation[];
let readerKey: string;
const checker = new SchemaChecker();

beforeAll(async () => {
  target = await startRestTarget();
  const doc = (await target.send({ method: 'GET', url: '/openapi.json', headers: {} })).json as OpenApiDocument;
  operations = operationsOf(doc);
  const reader = await target.cp.rest('POST', '/v1/api-keys', {
    tenant: target.home.tenantId,
    body: { name: 'fuzz-reader', scopes: ['envelopes:read', 'budgets:read'] },
  });
  readerKey = String((reader.body as { key_secret: string }).key_secret);
}, 60_000);
afterAll(async () => target?.close());

/** Who calls: real credentials of each kind, and broken ones. */
function principals(): fc.Arbitrary<Principal> {
  const as = (name: string, headers: Record<string, string>): Principal => ({ name, headers });
  const { home, other } = target;
  const tenantHeader = fc.oneof(
    { weight: 6, arbitrary: fc.constant(home.tenantId) },
    fc.constantFrom(other.tenantId, 'system', 'no-such-tenant', ''),
    fc.string({ unit: 'grapheme-ascii', maxLength: 80 }),
    fc.string({ unit: 'grapheme-ascii', minLength: 2000, maxLength: 6000 }),
  );
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant(as('tenant-admin', { 'x-api-key': home.adminKey })) },
    fc.constant({ name: 'reader', headers: { authorization: `Bearer ${readerKey}` } }),
    {
      weight: 3,
      arbitrary: tenantHeader.map((tenant) => as('root', { 'x-api-key': ROOT_KEY, 'x-tenant-id': tenant })),
    },
    tenantHeader.map((tenant) => ({
      name: 'admin-for',
      headers: { 'x-api-key': home.adminKey, 'x-tenant-id': tenant },
    })),
    fc
      .oneof(
        fc.constantFrom('', 'svc_', `${home.adminKey}x`, 'svc_abc_def', 'Bearer', 'eyJhbGciOiJub25lIn0.e30.'),
        fc.string({ unit: 'grapheme-ascii', maxLength: 300 }),
      )
      .chain((key) =>
        fc.constantFrom(
          as('bad-key', { 'x-api-key': key }),
          as('bad-bearer', { authorization: `Bearer ${key}` }),
          as('bad-scheme', { authorization: key }),
        ),
      ),
    fc.constant({ name: 'anonymous', headers: {} }),
  );
}

/** Header values a client may send besides credentials; header-unsafe characters are left out. */
const extraHeaders = fc.record(
  {
    'x-request-id': fc.oneof(fc.uuid(), fc.string({ unit: 'grapheme-ascii', maxLength: 300 })),
    accept: fc.constantFrom('application/json', 'text/html', '*/*', 'application/xml'),
  },
  { requiredKeys: [] },
);

/** Bodies beyond the document: any JSON, malformed text, wrong media types, oversized. */
const strangeBody = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => ({ body: JSON.stringify(v), type: 'application/json' })),
  },
  {
    weight: 6,
    arbitrary: fc
      .constantFrom(
        '{',
        '{"a":',
        '[1,2',
        'null',
        '""',
        '{"__proto__":{"admin":true}}',
        '{"constructor":{"prototype":{}}}',
      )
      .map((body) => ({ body, type: 'application/json' })),
  },
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        fc.string({ maxLength: 200 }),
        fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/xml', ''),
      )
      .map(([body, type]) => ({ body, type })),
  },
  {
    weight: 1,
    arbitrary: fc.constant({ body: JSON.stringify({ name: 'x'.repeat(1_100_000) }), type: 'application/json' }),
  },
);

/** `arbitrary` once in `every` draws, else null. */
function sometimes<T>(arbitrary: fc.Arbitrary<T>, every: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: every - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary });
}

const strangeQuery = fc.dictionary(
  fc.constantFrom('limit', 'status', 'tenant_id', 'tenantId', 'budget_id', 'event_type', 'action', 'x'),
  fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('-1', '0', '1e309', 'NaN', '10000', '[]', '%00')),
  { maxKeys: 4 },
);

interface Generated {
  request: RawRequest;
  op: Operation | undefined;
}

/** A request on a documented route (its method, or another), or on no route at all. */
function requests(): fc.Arbitrary<Generated> {
  const pools = poolsOf(target.home, target.other);
  const onRoute = fc.constantFrom(...operations).chain((op) =>
    fc
      .tuple(
        principals().chain((principal) => requestsFor(op, principal, pools, checker)),
        sometimes(strangeBody, 4),
        sometimes(strangeQuery, 4),
        sometimes(fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'), 8),
        extraHeaders,
      )
      .map(([{ request }, body, query, method, headers]) => {
        const out: RawRequest = { ...request, headers: { ...request.headers, ...headers } };
        if (body !== null) {
          out.body = body.body;
          if (body.type === '') delete out.headers['content-type'];
          else out.headers['content-type'] = body.type;
        }
        if (query !== null) {
          const url = new URL(out.url, 'http://x');
          for (const [k, v] of Object.entries(query)) url.searchParams.append(k, v);
          out.url = url.pathname + url.search;
        }
        const sameMethod = method === null || method === op.method;
        if (!sameMethod) out.method = method;
        if (out.method === 'GET' || out.method === 'DELETE') {
          // fetch sends no body with GET; DELETE keeps whatever was generated.
          if (out.method === 'GET') delete out.body;
        }
        return { request: out, op: sameMethod ? op : undefined };
      }),
  );
  const offRoute = fc
    .tuple(
      fc.constantFrom('GET', 'POST', 'DELETE'),
      fc.oneof(
        fc.constantFrom('/v1', '/v1/', '/v1/envelopes/', '/v1/unknown', '/v2/envelopes', '/%', '/v1/envelopes/a/b/c'),
        fc.webPath(),
      ),
      principals(),
    )
    .map(([method, url, principal]) => ({
      request: { method, url: url === '' ? '/' : url, headers: principal.headers },
      op: undefined,
    }));
  return fc.oneof({ weight: 9, arbitrary: onRoute }, { weight: 1, arbitrary: offRoute });
}

/** What a refusal breaks of the error contract: an SVC code of the catalogue, with its status. */
function refusalProblems(answer: RawAnswer): string[] {
  const parsed = ErrorBodySchema.safeParse(answer.json);
  if (!parsed.success) return [`refusal without the structured error body: ${answer.text.slice(0, 300)}`];
  const code = parsed.data.error.code as SvcCode;
  const spec = ERROR_CATALOGUE[code] as { http: number } | undefined;
  if (spec === undefined) return [`refusal with ${code}, not a catalogue code`];
  if (spec.http !== answer.status) return [`${code} answered with ${answer.status}, the catalogue says ${spec.http}`];
  return [];
}

describe('REST surface under generated input (spawned control plane)', () => {
  it('compares stored state in a way that sees a write', async () => {
    const before = await target.snapshot();
    const res = await target.cp.rest('POST', '/v1/budgets', {
      tenant: target.home.tenantId,
      body: { name: 'witness', type: 'token', limits: { max_tokens: 10 } },
    });
    expect(res.status).toBe(201);
    expect(await target.snapshot()).not.toBe(before);
  });

  it('answers every request without 5xx, as documented, and refusals write nothing', async () => {
    const parameters = fuzzParameters('rest-surface');
    const tally = new Map<number, number>();
    let before: string | null = null;
    await fc.assert(
      fc.asyncProperty(requests(), async ({ request, op }) => {
        before ??= await target.snapshot();
        const answer = await target.send(request);
        tally.set(answer.status, (tally.get(answer.status) ?? 0) + 1);
        const problems: string[] = [];
        if (answer.status >= 500) problems.push(`server error ${answer.status}: ${answer.text.slice(0, 300)}`);
        if (answer.status >= 400 && answer.status < 500) {
          problems.push(...refusalProblems(answer));
          if (op !== undefined) problems.push(...contractProblems(op, answer, checker));
          const after = await target.snapshot();
          if (after !== before) problems.push('a refused request changed stored state');
          before = after;
        } else before = null;
        if (problems.length > 0)
          throw new Error(
            `${request.method} ${request.url} ${JSON.stringify(request.headers)} ${(request.body ?? '').slice(0, 300)}\n  ${problems.join('\n  ')}`,
          );
      }),
      parameters,
    );
    process.stdout.write(`rest-surface statuses: ${JSON.stringify(Object.fromEntries(tally))}\n`);
    // The run exercised both sides: accepted requests and refusals.
    expect([...tally.keys()].some((s) => s < 300)).toBe(true);
    expect([...tally.keys()].some((s) => s >= 400)).toBe(true);
  }, 900_000);

  it('leaves the process alive, ready, and free of crash output', async () => {
    expect(target.cp.running).toBe(true);
    const ready = await target.send({ method: 'GET', url: '/health/ready', headers: {} });
    expect(ready.status).toBe(200);
    const crashes = target.cp
      .output()
      .split('\n')
      .filter((line) => line.trim() !== '')
      .filter((line) => {
        let entry: { level?: number; msg?: string };
        try {
          entry = JSON.parse(line) as { level?: number; msg?: string };
        } catch {
          return true; // a stack trace or anything else that is not a log record
        }
        // Webhooks point at loopback ports nothing listens on: giving up on them is expected.
        return (entry.level ?? 0) >= 50 && entry.msg !== 'webhook gave up after the last attempt';
      });
    expect(crashes).toEqual([]);
  });
});
