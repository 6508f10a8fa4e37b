import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { status, type ServiceClientConstructor } from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../core/errors/index.ts';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { clientsFor, discoverByReflection, failure, statusDetails, unary, type Clients } from '../harness/grpc.ts';

let cp: RunningControlPlane;
let address: string;
let admin: string;

beforeAll(async () => {
  cp = await startControlPlane();
  admin = await tenantWithKey(cp, 'acme');
  address = `127.0.0.1:${String(cp.plane.grpcPort())}`;
}, 30_000);
afterAll(async () => cp.close());

const CONTRACT_SERVICES = [
  'svc.brain.v1.ImmuneSystemService',
  'svc.brain.v1.OracleService',
  'svc.brain.v1.SemanticJudgeService',
  'svc.checkpoint.v1.CheckpointService',
  'svc.cost.v1.CostService',
  'svc.envelope.v1.EnvelopeService',
  'svc.policy.v1.PolicyService',
  'svc.tenant.v1.TenantService',
];

function methodsOf(definition: PackageDefinition, service: string): string[] {
  const found = definition[service];
  if (found === undefined || 'format' in found) throw new Error(`reflection did not describe ${service}`);
  return Object.keys(found);
}

describe('gRPC through server reflection only (no local .proto)', () => {
  let discovered: { services: string[]; definition: PackageDefinition };
  let clients: Clients;
  beforeAll(async () => {
    discovered = await discoverByReflection(address);
    clients = clientsFor(discovered.definition, address);
  });
  afterAll(() => clients.close());

  it('lists every service, the standard health service among them, and answers SERVING', async () => {
    expect(discovered.services).toEqual(expect.arrayContaining([...CONTRACT_SERVICES, 'grpc.health.v1.Health']));
    expect(await unary(clients.client('grpc.health.v1.Health'), 'Check', { service: '' })).toEqual({
      status: 'SERVING',
    });
    // The client constructors come from the descriptors the server sent.
    const constructor = clients.client('svc.policy.v1.PolicyService').constructor as ServiceClientConstructor;
    expect(Object.keys(constructor.service)).toContain('EvaluatePolicies');
  });

  it('reaches every method of the eight services: each answers, or refuses with an SVC code in its details', async () => {
    const outcomes: Record<string, string> = {};
    for (const service of CONTRACT_SERVICES) {
      const client = clients.client(service);
      for (const method of methodsOf(discovered.definition, service)) {
        try {
          await unary(client, method, {}, { key: admin });
          outcomes[`${service}/${method}`] = 'OK';
        } catch (error) {
          const e = error as Parameters<typeof statusDetails>[0];
          const reason = statusDetails(e).errorInfo?.reason ?? 'none';
          expect(Object.keys(ERROR_CATALOGUE), `${service}/${method}: ${e.message}`).toContain(reason);
          expect(e.code, `${service}/${method}`).toBe(ERROR_CATALOGUE[reason as keyof typeof ERROR_CATALOGUE].grpc);
          outcomes[`${service}/${method}`] = reason;
        }
      }
    }
    // Empty requests: lists answer, reads and writes name their missing field.
    expect(outcomes).toMatchObject({
      'svc.policy.v1.PolicyService/ListPolicies': 'OK',
      'svc.policy.v1.PolicyService/GetPolicy': 'SVC-SYS-9002',
      'svc.cost.v1.CostService/ListBudgets': 'OK',
      'svc.envelope.v1.EnvelopeService/CreateEnvelope': 'SVC-SYS-9002',
      'svc.tenant.v1.TenantService/ListApiKeys': 'OK',
      'svc.checkpoint.v1.CheckpointService/SaveCheckpoint': 'SVC-SYS-9002',
      'svc.checkpoint.v1.CheckpointService/ListCheckpoints': 'OK',
      'svc.brain.v1.ImmuneSystemService/ListDetections': 'OK',
      'svc.brain.v1.SemanticJudgeService/Evaluate': 'SVC-SYS-9002',
      'svc.brain.v1.OracleService/PredictOverrun': 'SVC-SYS-9002',
    });
    expect(Object.keys(outcomes)).toHaveLength(
      CONTRACT_SERVICES.reduce((n, s) => n + methodsOf(discovered.definition, s).length, 0),
    );
  });

  it('answers 16, 7, 3 with a BadRequest, 5 and 10, as the contracts say', async () => {
    const policies = clients.client('svc.policy.v1.PolicyService');
    expect((await failure(unary(policies, 'ListPolicies', {}))).code).toBe(status.UNAUTHENTICATED);
    const reader = await tenantWithKey(cp, 'acme', ['envelopes:read']);
    expect((await failure(unary(policies, 'ListPolicies', {}, { key: reader }))).code).toBe(status.PERMISSION_DENIED);
    const invalid = await failure(unary(policies, 'CreatePolicy', { policy: { name: '', rules: [] } }, { key: admin }));
    expect(invalid.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(invalid).badRequest?.fieldViolations.map((v) => v.field)).toEqual(
      expect.arrayContaining(['policy.name', 'policy.rules']),
    );
    const missing = await failure(
      unary(policies, 'GetPolicy', { policy_id: '00000000-0000-4000-8000-000000000000' }, { key: admin }),
    );
    expect(missing.code).toBe(status.NOT_FOUND);
    const created = await unary(
      clients.client('svc.cost.v1.CostService'),
      'CreateBudget',
      { budget: { name: 'by-reflection', limits: { max_cost_usd: 2 } } },
      { key: admin },
    );
    expect(created.budget).toMatchObject({ tenant_id: 'acme', type: 'BUDGET_TYPE_COST' });
    // A version conflict: the context was written since the version this writer read.
    const contexts = clients.client('svc.checkpoint.v1.CheckpointService');
    const update = (expected: number) =>
      unary(
        contexts,
        'UpdateExecutionContext',
        {
          execution_id: 'by-reflection',
          updates: { fields: [{ key: 'step', value: { number_value: expected } }] },
          expected_version: expected,
        },
        { key: admin },
      );
    await update(0);
    const stale = await failure(update(0));
    expect(stale.code).toBe(status.ABORTED);
    expect(statusDetails(stale).errorInfo?.reason).toBe('SVC-ADP-5006');
  });
});

const BUF = fileURLToPath(new URL('../../node_modules/.bin/buf', import.meta.url));

/**
 * `buf curl` over gRPC with server reflection: a strict client that links every file it is sent.
 * Run asynchronously: the server answering it lives in this process.
 */
async function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'buf-curl-'));
  try {
    return await new Promise((resolve) => {
      execFile(
        BUF,
        ['curl', '--protocol', 'grpc', '--http2-prior-knowledge', ...args],
        { timeout: 60_000, env: { PATH: process.env.PATH, HOME: home, BUF_CACHE_DIR: join(home, 'cache') } },
        (error, stdout, stderr) => resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
      );
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

describe('a strict reflection client (buf curl)', () => {
  it('lists the services, calls a method, and receives the error details', async () => {
    const listed = await bufCurl(['--list-services', `http://${address}`]);
    expect(listed.stdout.trim().split('\n')).toEqual(['grpc.health.v1.Health', ...CONTRACT_SERVICES]);
    const created = await bufCurl([
      '-H',
      `authorization: Bearer ${admin}`,
      '-d',
      '{"budget":{"name":"curl-made","limits":{"max_cost_usd":4}}}',
      `http://${address}/svc.cost.v1.CostService/CreateBudget`,
    ]);
    expect(created.stderr).toBe('');
    expect(JSON.parse(created.stdout)).toMatchObject({
      budget: { name: 'curl-made', type: 'BUDGET_TYPE_COST', limits: { maxCostUsd: 4 } },
    });
    const refused = await bufCurl(['-d', '{}', `http://${address}/svc.cost.v1.CostService/ListBudgets`]);
    expect(refused.code).not.toBe(0);
    const answer = JSON.parse(refused.stderr) as { code: string; details: Array<{ type: string; value: string }> };
    expect(answer.code).toBe('unauthenticated');
    expect(answer.details.map((d) => d.type)).toEqual(['google.rpc.ErrorInfo']);
    expect(Buffer.from(answer.details[0]?.value ?? '', 'base64').toString('latin1')).toContain('SVC-SYS-9003');
  });
});
