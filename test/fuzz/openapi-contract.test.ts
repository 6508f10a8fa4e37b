import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  contractProblems,
  operationsOf,
  poolsOf,
  requestsFor,
  SchemaChecker,
  type OpenApiDocument,
  type Operation,
  type Principal,
} from './openapi-requests.ts';
import { ROOT_KEY, startRestTarget, type RestTarget } from './rest-target.ts';
import { fuzzParameters, fuzzRuns } from './seed.ts';

/**
 * The served OpenAPI document tells the truth: for every operation, requests generated from the
 * document's own schemas (valid and invalid) get no 5xx, only documented statuses, the
 * documented content type and a body valid against the documented schema; and what the document
 * calls invalid is refused. Run as the tenant's admin key and as the root key acting for it.
 */
let target: RestTarget;
let doc: OpenApiDocument;
let operations: Operation[];
const checker = new SchemaChecker();

beforeAll(async () => {
  target = await startRestTarget();
  const res = await target.send({ method: 'GET', url: '/openapi.json', headers: {} });
  expect(res.status).toBe(200);
  doc = res.json as OpenApiDocument;
  operations = operationsOf(doc);
}, 60_000);
afterAll(async () => target?.close());

/** Every route the control plane serves is in the document and so under test. */
const EXPECTED_OPERATIONS = 70;

describe('the OpenAPI document against the running control plane', () => {
  it('lists every operation', () => {
    expect(operations.length).toBe(EXPECTED_OPERATIONS);
  });

  const principals: Array<[string, () => Principal]> = [
    ['the tenant admin key', () => ({ name: 'tenant-admin', headers: { 'x-api-key': target.home.adminKey } })],
    [
      'the root key with X-Tenant-ID',
      () => ({ name: 'root', headers: { 'x-api-key': ROOT_KEY, 'x-tenant-id': target.home.tenantId } }),
    ],
  ];

  it.each(principals)(
    'holds for every operation called as %s',
    async (_name, principalOf) => {
      const principal = principalOf();
      const pools = poolsOf(target.home, target.other);
      const perOperation = Math.max(10, Math.ceil(fuzzRuns() / operations.length));
      const parameters = fuzzParameters(`openapi-contract (${principal.name})`, perOperation);
      const failures: string[] = [];
      const tally: Record<string, Record<number, number>> = {};
      for (const op of operations) {
        const seen = (tally[op.operationId] = {} as Record<number, number>);
        const outcome = await fc.check(
          fc.asyncProperty(requestsFor(op, principal, pools, checker), async ({ request, invalid }) => {
            const answer = await target.send(request);
            seen[answer.status] = (seen[answer.status] ?? 0) + 1;
            const problems = contractProblems(op, answer, checker);
            if (invalid.length > 0 && (answer.status < 400 || answer.status >= 500))
              problems.push(`the document refuses ${invalid.join(', ')} but the answer is ${answer.status}`);
            if (problems.length > 0)
              throw new Error(`${request.method} ${request.url} ${request.body ?? ''}\n  ${problems.join('\n  ')}`);
          }),
          parameters,
        );
        if (outcome.failed)
          failures.push(`${op.method} ${op.path}: ${String((outcome.errorInstance as Error | undefined)?.message)}`);
      }
      process.stdout.write(`openapi-contract (${principal.name}) statuses: ${JSON.stringify(tally)}\n`);
      expect(failures, `seed ${String(parameters.seed)}\n${failures.join('\n')}`).toEqual([]);
    },
    600_000,
  );
});
