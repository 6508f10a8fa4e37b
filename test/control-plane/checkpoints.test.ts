import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { MAX_JSON_VALUES, MAX_METADATA_DEPTH } from '../../core/domain/index.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { createTestDatabase, postgresReachable, type TestDatabase } from '../harness/postgres.ts';
import { clientsFor, failure, statusDetails, unary, type CallOptions, type Clients } from '../harness/grpc.ts';

const CHECKPOINTS = 'svc.checkpoint.v1.CheckpointService';

let cp: RunningControlPlane;
let clients: Clients;
let acme: string;
let envelopeId: string;

function call(method: string, request: object, options: CallOptions = {}) {
  return unary(clients.client(CHECKPOINTS), method, request, { defaultKey: acme, ...options });
}

/** A struct as proto-loader takes it. */
const struct = (values: Record<string, number | string>) => ({
  fields: Object.fromEntries(
    Object.entries(values).map(([k, v]) => [k, typeof v === 'number' ? { numberValue: v } : { stringValue: v }]),
  ),
});

const checkpoint = (executionId: string, extra: Record<string, unknown> = {}) => ({
  envelope_id: envelopeId,
  execution_id: executionId,
  metadata: {
    type: 'CHECKPOINT_TYPE_AUTO',
    framework_type: 'langgraph',
    current_node: 'plan',
    cost_snapshot_usd: 0.25,
  },
  data: struct({ step: 1 }),
  ...extra,
});

beforeAll(async () => {
  cp = await startControlPlane();
  acme = await tenantWithKey(cp, 'acme');
  clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(cp.plane.grpcPort())}`);
  const envelope = await cp.call('POST', '/v1/envelopes', { key: acme, body: { adapter_type: 'langgraph' } });
  expect(envelope.status).toBe(201);
  envelopeId = String(envelope.body.envelope_id);
}, 30_000);

afterAll(async () => {
  clients.close();
  await cp.close();
});

describe('checkpoints over gRPC', () => {
  it('saves versions of an execution, prunes past max_versions, restores by id and version', async () => {
    const saved = [];
    for (let step = 1; step <= 4; step++)
      saved.push(
        await call('SaveCheckpoint', {
          checkpoint: checkpoint('exec-grpc', { checkpoint_id: 'thread-1', data: struct({ step }) }),
          auto_version: true,
          max_versions: 3,
        }),
      );
    expect(saved.map((s) => s.version as number)).toEqual([1, 2, 3, 4]);
    expect(saved[3]).toMatchObject({ checkpoint_id: 'thread-1', size_bytes: String('{"step":4}'.length) });

    const versions = await call('ListCheckpointVersions', { execution_id: 'exec-grpc' });
    expect(versions.versions.map((v: { version: number }) => v.version)).toEqual([4, 3, 2]);
    expect(versions.versions[0].data).toBeNull();

    const latest = await call('GetCheckpoint', { checkpoint_id: 'thread-1' });
    expect(latest.checkpoint).toMatchObject({
      version: 4,
      tenant_id: 'acme',
      envelope_id: envelopeId,
      data: { fields: { step: { numberValue: 4 } } },
      metadata: { type: 'CHECKPOINT_TYPE_AUTO', framework_type: 'langgraph', cost_snapshot_usd: 0.25 },
    });
    const second = await call('GetCheckpointVersion', { execution_id: 'exec-grpc', version: 2 });
    expect(second.checkpoint.data).toEqual({ fields: { step: { numberValue: 2, kind: 'numberValue' } } });

    const pruned = await failure(call('GetCheckpoint', { checkpoint_id: 'thread-1', version: 1 }));
    expect(pruned.code).toBe(status.NOT_FOUND);
    expect(statusDetails(pruned).errorInfo?.reason).toBe('SVC-SYS-9006');

    // Announced in the checkpoint family of events, and audited.
    const announced = await eventually(
      () => cp.published.filter((m) => m.subject === 'svc.acme.events.checkpoint.saved'),
      (found) => found.length >= 4,
    );
    expect(announced[3]?.data).toMatchObject({
      envelope_id: envelopeId,
      event_type: 'checkpoint.saved',
      payload: { checkpoint_id: 'thread-1', execution_id: 'exec-grpc', version: 4 },
    });
    const audit = await cp.call('GET', '/v1/audit?action=checkpoint.save', { key: acme });
    expect(audit.body[0]).toMatchObject({
      resource: { type: 'checkpoint', id: 'thread-1' },
      metadata: { version: 4, versions_pruned: 1 },
    });
  });

  it('soft-deletes (marked, out of lists) and deletes every version on request', async () => {
    for (let i = 0; i < 2; i++)
      await call('SaveCheckpoint', {
        checkpoint: checkpoint('exec-del', { checkpoint_id: `d${i}` }),
        auto_version: true,
      });
    await call('DeleteCheckpoint', { checkpoint_id: 'd0', soft_delete: true });
    expect((await call('GetCheckpoint', { checkpoint_id: 'd0' })).checkpoint.deleted_at).not.toBeNull();
    const listed = await call('ListCheckpoints', { execution_id: 'exec-del' });
    expect(listed.checkpoints.map((c: { checkpoint_id: string }) => c.checkpoint_id)).toEqual(['d1']);
    await call('DeleteCheckpoint', { checkpoint_id: 'd1', delete_all_versions: true });
    expect((await failure(call('GetCheckpoint', { checkpoint_id: 'd0' }))).code).toBe(status.NOT_FOUND);
    expect((await call('ListCheckpointVersions', { execution_id: 'exec-del' })).versions).toEqual([]);
  });

  it('queries by tags (all of them), cost and size ranges, paging with an opaque token', async () => {
    const tagged = (tags: Record<string, string>, cost: number, data: Record<string, string>) =>
      call('SaveCheckpoint', {
        checkpoint: checkpoint('exec-query', {
          metadata: { type: 'CHECKPOINT_TYPE_ERROR', framework_type: 'crewai', cost_snapshot_usd: cost, tags },
          data: struct(data),
        }),
        auto_version: true,
      });
    await tagged({ team: 'red', env: 'prod' }, 1, { a: 'x' });
    await tagged({ team: 'red' }, 5, { a: 'x'.repeat(500) });
    await tagged({ team: 'blue', env: 'prod' }, 9, { a: 'y' });
    const query = (q: object, extra: object = {}) =>
      call('QueryCheckpoints', { query: { execution_ids: ['exec-query'], ...q }, ...extra });
    const versions = (r: Record<string, unknown>) =>
      (r.checkpoints as Array<{ version: number }>).map((c) => c.version);
    expect(versions(await query({ tags: { team: 'red', env: 'prod' } }))).toEqual([1]);
    expect(versions(await query({ tags: { env: 'prod' } }))).toEqual([3, 1]);
    expect(versions(await query({ min_cost_usd: 2, max_cost_usd: 9 }))).toEqual([3, 2]);
    expect(versions(await query({ min_size_bytes: 100 }))).toEqual([2]);
    expect(versions(await query({ types: ['CHECKPOINT_TYPE_ERROR'], framework_types: ['crewai'] }))).toEqual([3, 2, 1]);
    expect(versions(await query({}, { order_by: 'created_at asc' }))).toEqual([1, 2, 3]);
    const first = await query({}, { page_size: 2 });
    expect(versions(first)).toEqual([3, 2]);
    expect(first.next_page_token).not.toBe('');
    const rest = await query({}, { page_size: 2, page_token: first.next_page_token });
    expect(versions(rest)).toEqual([1]);
    expect(rest.next_page_token).toBe('');
  });

  it('refuses an invalid field with INVALID_ARGUMENT and a BadRequest naming it', async () => {
    const missing = await failure(
      call('SaveCheckpoint', { checkpoint: { ...checkpoint('exec-bad'), envelope_id: '' }, auto_version: true }),
    );
    expect(missing.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(missing).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['checkpoint.envelope_id']);
    const range = await failure(call('QueryCheckpoints', { query: { min_cost_usd: 5, max_cost_usd: 1 } }));
    expect(range.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(range).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['max_cost_usd']);
    const order = await failure(call('ListCheckpoints', { order_by: 'size' }));
    expect(statusDetails(order).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['order_by']);
    const big = await failure(
      call('SaveCheckpoint', {
        checkpoint: checkpoint('exec-bad', { data: struct({ blob: 'x'.repeat(1_100_000) }) }),
        auto_version: true,
      }),
    );
    expect(big.code).toBe(status.OUT_OF_RANGE);
    expect(statusDetails(big).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['checkpoint.data']);
    const reader = await tenantWithKey(cp, 'acme', ['checkpoints:read']);
    const denied = await failure(call('SaveCheckpoint', { checkpoint: checkpoint('exec-bad') }, { key: reader }));
    expect(denied.code).toBe(status.PERMISSION_DENIED);
    expect((await call('ListCheckpoints', {}, { key: reader })).checkpoints.length).toBeGreaterThan(0);
  });

  it('keeps one tenant’s checkpoints and contexts from another', async () => {
    const globex = await tenantWithKey(cp, 'globex');
    await call('SaveCheckpoint', {
      checkpoint: checkpoint('exec-iso', { checkpoint_id: 'iso-1' }),
      auto_version: true,
    });
    await call('UpdateExecutionContext', { execution_id: 'exec-iso', updates: struct({ secret: 'acme' }) });
    expect((await failure(call('GetCheckpoint', { checkpoint_id: 'iso-1' }, { key: globex }))).code).toBe(
      status.NOT_FOUND,
    );
    expect((await call('ListCheckpoints', {}, { key: globex })).checkpoints).toEqual([]);
    expect((await call('QueryCheckpoints', { query: { tenant_ids: ['acme'] } }, { key: globex })).checkpoints).toEqual(
      [],
    );
    const context = await call('GetExecutionContext', { execution_id: 'exec-iso' }, { key: globex });
    expect(context.context).toMatchObject({ version: '0', values: { fields: {} } });
    // An envelope of another tenant is not there to checkpoint.
    const foreign = await failure(
      call('SaveCheckpoint', { checkpoint: checkpoint('exec-iso'), auto_version: true }, { key: globex }),
    );
    expect(foreign.code).toBe(status.NOT_FOUND);
  });
});

describe('the execution context over gRPC', () => {
  it('merges by strategy, deletes keys, filters keys, and answers ABORTED to the loser of two concurrent writers', async () => {
    const first = await call('UpdateExecutionContext', {
      execution_id: 'exec-ctx',
      updates: { fields: { plan: { structValue: struct({ a: 1, b: 2 }) }, gone: { boolValue: true } } },
      expected_version: 0,
    });
    expect(first.context.version).toBe('1');
    const merged = await call('UpdateExecutionContext', {
      execution_id: 'exec-ctx',
      updates: { fields: { plan: { structValue: struct({ b: 3 }) } } },
      delete_keys: ['gone'],
      merge_strategy: 'MERGE_STRATEGY_MERGE_RECURSIVE',
    });
    expect(merged.context.version).toBe('2');
    const read = await call('GetExecutionContext', { execution_id: 'exec-ctx', keys: ['plan'] });
    expect(read.context.values.fields.plan.structValue.fields).toMatchObject({
      a: { numberValue: 1 },
      b: { numberValue: 3 },
    });
    expect(Object.keys(read.context.values.fields)).toEqual(['plan']);

    const outcomes = await Promise.allSettled(
      ['one', 'two'].map((writer) =>
        call('UpdateExecutionContext', { execution_id: 'exec-ctx', updates: struct({ writer }), expected_version: 2 }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    const lost = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect(lost.reason.code).toBe(status.ABORTED);
    expect(statusDetails(lost.reason).errorInfo?.reason).toBe('SVC-ADP-5006');

    const custom = await failure(
      call('UpdateExecutionContext', {
        execution_id: 'exec-ctx',
        updates: struct({ a: 1 }),
        merge_strategy: 'MERGE_STRATEGY_CUSTOM',
      }),
    );
    expect(custom.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(custom).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['merge_strategy']);
    expect(custom.details).toContain('MERGE_STRATEGY_CUSTOM');
    const conflict = await failure(
      call('UpdateExecutionContext', {
        execution_id: 'exec-ctx',
        updates: struct({ writer: 'three' }),
        merge_strategy: 'MERGE_STRATEGY_FAIL_ON_CONFLICT',
      }),
    );
    expect(conflict.code).toBe(status.ABORTED);
  });
});

describe('checkpoints over the transcoded REST routes', () => {
  it('lists the nine routes in the OpenAPI document', async () => {
    const doc = (await cp.call('GET', '/openapi.json', { key: null })).body as {
      paths: Record<string, Record<string, { operationId: string }>>;
    };
    const operations = Object.entries(doc.paths).flatMap(([path, verbs]) =>
      Object.entries(verbs)
        .filter(([, op]) => op.operationId.startsWith('CheckpointService.'))
        .map(([verb, op]) => `${verb.toUpperCase()} ${path} ${op.operationId}`),
    );
    expect(operations.sort()).toEqual(
      [
        'DELETE /v1/checkpoints/{checkpoint_id} CheckpointService.DeleteCheckpoint',
        'GET /v1/checkpoints CheckpointService.ListCheckpoints',
        'GET /v1/checkpoints/{checkpoint_id} CheckpointService.GetCheckpoint',
        'GET /v1/checkpoints/{execution_id}/versions CheckpointService.ListCheckpointVersions',
        'GET /v1/checkpoints/{execution_id}/versions/{version} CheckpointService.GetCheckpointVersion',
        'GET /v1/executions/{execution_id}/context CheckpointService.GetExecutionContext',
        'POST /v1/checkpoints CheckpointService.SaveCheckpoint',
        'POST /v1/checkpoints:query CheckpointService.QueryCheckpoints',
        'PUT /v1/executions/{execution_id}/context CheckpointService.UpdateExecutionContext',
      ].sort(),
    );
  });

  it('saves, lists versions, reads a version, queries, and reads and writes the context', async () => {
    const saved = await cp.call('POST', '/v1/checkpoints', {
      key: acme,
      body: {
        checkpoint: {
          envelope_id: envelopeId,
          execution_id: 'exec-rest',
          metadata: { type: 'CHECKPOINT_TYPE_MANUAL', tags: { team: 'red' }, cost_snapshot_usd: 3 },
          data: { messages: ['hi'], step: 1 },
        },
        auto_version: true,
      },
    });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ version: 1 });
    await cp.call('POST', '/v1/checkpoints', {
      key: acme,
      body: {
        checkpoint: { envelope_id: envelopeId, execution_id: 'exec-rest', data: { step: 2 } },
        auto_version: true,
      },
    });
    const versions = await cp.call('GET', '/v1/checkpoints/exec-rest/versions?page_size=1', { key: acme });
    expect(versions.status).toBe(200);
    expect(versions.body.versions.map((v: { version: number }) => v.version)).toEqual([2]);
    expect(versions.body.next_page_token).toBeTruthy();
    const version = await cp.call('GET', '/v1/checkpoints/exec-rest/versions/1', { key: acme });
    expect(version.body.checkpoint).toMatchObject({ data: { messages: ['hi'], step: 1 }, version: 1 });
    const byId = await cp.call('GET', `/v1/checkpoints/${String(saved.body.checkpoint_id)}`, { key: acme });
    expect(byId.body.checkpoint.metadata).toMatchObject({ type: 'CHECKPOINT_TYPE_MANUAL', tags: { team: 'red' } });

    const query = await cp.call('POST', '/v1/checkpoints:query', {
      key: acme,
      body: { query: { tags: { team: 'red' }, min_cost_usd: 3, max_cost_usd: 3, execution_ids: ['exec-rest'] } },
    });
    expect(query.status).toBe(200);
    expect(query.body.checkpoints.map((c: { version: number }) => c.version)).toEqual([1]);
    const list = await cp.call('GET', '/v1/checkpoints?execution_id=exec-rest&order_by=created_at%20asc', {
      key: acme,
    });
    expect(list.body.checkpoints.map((c: { version: number }) => c.version)).toEqual([1, 2]);

    const put = await cp.call('PUT', '/v1/executions/exec-rest/context', {
      key: acme,
      body: { updates: { cursor: 7, plan: { a: 1 } }, expected_version: 0 },
    });
    expect(put.status).toBe(200);
    expect(put.body.context).toMatchObject({ version: '1', values: { cursor: 7, plan: { a: 1 } } });
    const got = await cp.call('GET', '/v1/executions/exec-rest/context?keys=cursor', { key: acme });
    expect(got.body.context.values).toEqual({ cursor: 7 });
    expectSvcError(
      await cp.call('PUT', '/v1/executions/exec-rest/context', {
        key: acme,
        body: { updates: { x: 1 }, expected_version: 0 },
      }),
      409,
      'SVC-ADP-5006',
    );

    await cp.call('DELETE', `/v1/checkpoints/${String(saved.body.checkpoint_id)}?soft_delete=true`, { key: acme });
    const after = await cp.call('GET', '/v1/checkpoints/exec-rest/versions', { key: acme });
    expect(after.body.versions.map((v: { version: number }) => v.version)).toEqual([2]);
  });

  it('answers 400 naming the field, and 404 for an unknown checkpoint or version', async () => {
    const bad = expectSvcError(
      await cp.call('POST', '/v1/checkpoints', {
        key: acme,
        body: { checkpoint: { envelope_id: envelopeId, execution_id: 'exec-rest', data: { a: 1 } } },
      }),
      400,
      'SVC-SYS-9002',
    );
    expect(
      (bad.details as { field_violations: Array<{ field: string }> }).field_violations.map((v) => v.field),
    ).toEqual(['checkpoint.version']);
    const range = expectSvcError(
      await cp.call('POST', '/v1/checkpoints:query', {
        key: acme,
        body: { query: { min_size_bytes: 9, max_size_bytes: 1 } },
      }),
      400,
      'SVC-SYS-9002',
    );
    expect(JSON.stringify(range.details)).toContain('max_size_bytes');
    expectSvcError(await cp.call('GET', '/v1/checkpoints/no-such', { key: acme }), 404, 'SVC-SYS-9006');
    expectSvcError(await cp.call('GET', '/v1/checkpoints/exec-rest/versions/99', { key: acme }), 404, 'SVC-SYS-9006');
    expectSvcError(await cp.call('DELETE', '/v1/checkpoints/no-such', { key: acme }), 404, 'SVC-SYS-9006');
  });
});

/** The fields a refusal names. */
function violated(details: unknown): string[] {
  return (details as { field_violations: Array<{ field: string }> }).field_violations.map((v) => v.field);
}

describe('free-form JSON is bounded before it is converted', () => {
  const many = `[${Array(MAX_JSON_VALUES).fill('[]').join(',')}]`;
  const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

  it('refuses too many values with 413 and too deep a nesting with 400, naming the field, over REST', async () => {
    const context = (raw: string) => cp.call('PUT', '/v1/executions/bounded/context', { key: acme, raw });
    const wide = expectSvcError(await context(`{"updates":{"a":${many}}}`), 413, 'SVC-SYS-9009');
    expect(violated(wide.details)).toEqual(['updates']);
    for (const depth of [MAX_METADATA_DEPTH, 60, 5_000]) {
      const refused = expectSvcError(await context(`{"updates":{"a":${deep(depth)}}}`), 400, 'SVC-SYS-9002');
      expect(violated(refused.details)).toEqual(['updates']);
    }
    expect((await context(`{"updates":{"a":${deep(MAX_METADATA_DEPTH - 1)}}}`)).status).toBe(200);
    const saved = await cp.call('POST', '/v1/checkpoints', {
      key: acme,
      raw: `{"checkpoint":{"envelope_id":"${envelopeId}","execution_id":"bounded","version":1,"data":{"a":${many}}}}`,
    });
    expect(violated(expectSvcError(saved, 413, 'SVC-SYS-9009').details)).toEqual(['checkpoint.data']);
  });

  it('keeps what it stores readable over gRPC, within its 4 MiB message limit', async () => {
    const save = (executionId: string, data: string) =>
      cp.call('POST', '/v1/checkpoints', {
        key: acme,
        raw: `{"checkpoint":{"envelope_id":"${envelopeId}","execution_id":"${executionId}","version":1,"data":${data}}}`,
      });
    // 1 MiB of small numbers as JSON is over 5 MiB as protobuf: refused rather than stored unreadable.
    const small = expectSvcError(
      await save('readable', `{"a":[${Array(500_000).fill('0').join(',')}]}`),
      413,
      'SVC-SYS-9009',
    );
    expect(violated(small.details)).toEqual(['checkpoint.data']);
    // The most values allowed, each a number (the largest ratio of protobuf to JSON), and text up to the body limit.
    const numbers = Array(MAX_JSON_VALUES - 3)
      .fill('1')
      .join(',');
    const text = 'x'.repeat(1024 * 1024 - numbers.length - 200);
    const stored = await save('readable', `{"a":[${numbers}],"b":"${text}"}`);
    expect(stored.status, JSON.stringify(stored.body).slice(0, 300)).toBe(200);
    const read = await call('GetCheckpoint', { checkpoint_id: stored.body.checkpoint_id });
    expect(read.checkpoint.data.fields.a.listValue.values).toHaveLength(MAX_JSON_VALUES - 3);
  });

  it('refuses a context update that would make the stored context hold too many values', async () => {
    const half = `[${Array(MAX_JSON_VALUES / 2 + 10)
      .fill('1')
      .join(',')}]`;
    const update = (key: string) =>
      cp.call('PUT', '/v1/executions/accumulating/context', { key: acme, raw: `{"updates":{"${key}":${half}}}` });
    expect((await update('a')).status).toBe(200);
    expect(violated(expectSvcError(await update('b'), 413, 'SVC-SYS-9009').details)).toEqual(['updates']);
    const read = await call('GetExecutionContext', { execution_id: 'accumulating' });
    expect(Object.keys(read.context.values.fields)).toEqual(['a']);
  });

  it('refuses the same over gRPC, naming the field', async () => {
    const lists = Array.from({ length: MAX_JSON_VALUES }, () => ({ listValue: { values: [] } }));
    const wide = await failure(
      call('UpdateExecutionContext', {
        execution_id: 'bounded',
        updates: { fields: { a: { listValue: { values: lists } } } },
      }),
    );
    expect(wide.code, wide.details).toBe(status.OUT_OF_RANGE);
    expect(statusDetails(wide).errorInfo?.reason).toBe('SVC-SYS-9009');
    expect(statusDetails(wide).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['updates']);
    let value: object = { listValue: { values: [] } };
    for (let depth = 1; depth < 40; depth++) value = { listValue: { values: [value] } };
    const data = { fields: { a: value } };
    const deepCall = await failure(call('SaveCheckpoint', { checkpoint: checkpoint('bounded', { version: 1, data }) }));
    expect(deepCall.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(deepCall).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['checkpoint.data']);
  });
});

describe('a key named __proto__', () => {
  /** An object whose own key `__proto__` holds `value`, as a client may encode it. */
  const withProto = (value: object, rest: Record<string, unknown> = {}) =>
    Object.defineProperty({ ...rest }, '__proto__', { value, enumerable: true, writable: true, configurable: true });
  const text = (s: string) => ({ stringValue: s });

  it('is refused over gRPC as over REST, naming the field, at the top and nested', async () => {
    const rest = await cp.call('PUT', '/v1/executions/proto/context', {
      key: acme,
      raw: '{"updates":{"__proto__":{"polluted":"yes"}}}',
    });
    expect(rest.status).toBe(400);
    const top = withProto({ structValue: { fields: { polluted: text('yes') } } }, { plain: text('p') });
    const nested = { nested: { structValue: { fields: withProto({ structValue: { fields: { more: text('1') } } }) } } };
    for (const fields of [top, nested]) {
      const error = await failure(call('UpdateExecutionContext', { execution_id: 'proto', updates: { fields } }));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(statusDetails(error).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['updates']);
    }
    const saved = await failure(
      call('SaveCheckpoint', { checkpoint: checkpoint('proto', { version: 1, data: { fields: top } }) }),
    );
    expect(statusDetails(saved).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['checkpoint.data']);
    const read = await call('GetExecutionContext', { execution_id: 'proto' });
    expect(read.context.version).toBe('0');
  });
});

describe.skipIf(!(await postgresReachable()))('two control-plane replicas on one PostgreSQL database', () => {
  let database: TestDatabase;
  const replicas: RunningControlPlane[] = [];
  beforeAll(async () => {
    database = await createTestDatabase();
    for (let i = 0; i < 2; i++)
      replicas.push(await startControlPlane({ database_url: database.url, database_pool_size: 4 }));
  }, 60_000);
  afterAll(async () => {
    for (const replica of replicas.splice(0)) await replica.close();
    await database?.drop();
  });

  it('let exactly one of two writers of one context version through, the other 409 SVC-ADP-5006, round after round', async () => {
    const [a, b] = replicas as [RunningControlPlane, RunningControlPlane];
    const key = await tenantWithKey(a, 'acme');
    const put = (replica: RunningControlPlane, writer: string, expected: number) =>
      replica.call('PUT', '/v1/executions/shared/context', {
        key,
        body: { updates: { writer, [writer]: expected }, expected_version: expected },
      });
    for (let version = 0; version < 8; version++) {
      const answers = await Promise.all([put(a, 'a', version), put(b, 'b', version)]);
      expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
      const winner = answers.find((r) => r.status === 200)!;
      expect(winner.body.context.version).toBe(String(version + 1));
      expectSvcError(
        answers.find((r) => r.status === 409)!,
        409,
        'SVC-ADP-5006',
      );
    }
    const final = await b.call('GET', '/v1/executions/shared/context', { key });
    expect(final.body.context.version).toBe('8');
    // Without an expected version neither update is lost: each applies over the other.
    const unchecked = await Promise.all(
      ['x', 'y'].map((k, i) =>
        (i === 0 ? a : b).call('PUT', '/v1/executions/shared/context', { key, body: { updates: { [k]: true } } }),
      ),
    );
    expect(unchecked.map((r) => r.status)).toEqual([200, 200]);
    const merged = await a.call('GET', '/v1/executions/shared/context?keys=x&keys=y', { key });
    expect(merged.body.context).toMatchObject({ version: '10', values: { x: true, y: true } });
  });
});
