import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import type { Outbox } from '../../core/outbox/outbox.ts';
import { anEnvelope } from '../../test/storage/records.ts';
import { AuditLog } from '../audit/audit-log.ts';
import type { Caller } from '../caller.ts';
import { EffectDispatcher } from '../effects/dispatcher.ts';
import { openPublicationOutbox } from '../effects/publication-outbox.ts';
import { WebhookTargets } from '../effects/webhook-targets.ts';
import { WebhookSender } from '../effects/webhooks.ts';
import { collectPages } from '../storage/paging.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import {
  CheckpointQuerySchema,
  MAX_CHECKPOINT_DATA_BYTES,
  MAX_CONTEXT_BYTES,
  type SaveCheckpointInput,
  type UpdateExecutionContextInput,
} from './checkpoint.ts';
import { Checkpoints } from './checkpoints.ts';
import { ExecutionContexts } from './execution-contexts.ts';
import { applyUpdate, conflictingKey, mergeRecursive } from './merge.ts';

let dir: string;
let storage: LmdbStorage;
let outbox: Outbox;
let audit: AuditLog;
let checkpoints: Checkpoints;
let contexts: ExecutionContexts;
let tick = 0;
const clock = () => new Date(Date.UTC(2026, 10, 23, 10, 0, 0, tick++));

const caller = (tenant: string): Caller => ({
  principal: { type: 'bootstrap', id: 'root', tenant_id: tenant, scopes: new Set(['admin']), administrator: true },
  tenant,
  requestId: 'r',
});
const ACME = caller('acme');

const save = (overrides: Partial<SaveCheckpointInput['checkpoint']> = {}, options: Partial<SaveCheckpointInput> = {}) =>
  checkpoints.save(ACME, {
    checkpoint: {
      envelope_id: 'env-1',
      execution_id: 'exec-1',
      version: 0,
      metadata: { type: 'AUTO', framework_type: 'langgraph', current_node: null, cost_snapshot_usd: 0, tags: {} },
      data: { step: 1 },
      ...overrides,
    },
    auto_version: true,
    max_versions: 0,
    ...options,
  });

const update = (input: Partial<UpdateExecutionContextInput>, who = ACME) =>
  contexts.update(who, {
    execution_id: 'exec-1',
    updates: {},
    delete_keys: [],
    merge_strategy: 'LAST_WRITE_WINS',
    ...input,
  });

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'checkpoints-'));
  ({ storage } = await LmdbStorage.open({ path: dir }));
  const log = pino({ level: 'silent' });
  outbox = openPublicationOutbox({
    storage,
    bus: createMemoryMessaging({ logger: log }).bus,
    registry: new Registry(),
    logger: log,
  });
  const targets = new WebhookTargets({ allowHttp: false, allowedHosts: '' });
  const effects = new EffectDispatcher({
    storage,
    outbox,
    webhooks: new WebhookSender({ secrets: () => Promise.resolve([]), targets, maxAttempts: 1, timeoutMs: 100 }, log),
    log,
  });
  audit = new AuditLog(storage, clock);
  // Small bounds, so that reaching them takes a few saves.
  checkpoints = new Checkpoints({ storage, audit, effects, clock, limits: { maxVersions: 4, executionsPerTenant: 2 } });
  contexts = new ExecutionContexts({ storage, audit, effects, clock, perTenant: 2 });
  await storage.withTransaction(async (tx) => {
    for (const tenant of ['acme', 'other'])
      await tx.envelopes.insert(tenant, anEnvelope(tenant, { envelope_id: 'env-1' }), { executionTaken: 'refuse' });
  });
});
afterEach(async () => {
  await outbox.close();
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('merge strategies', () => {
  it('merges objects at every depth under MERGE_RECURSIVE; arrays and scalars replace', () => {
    const stored = { a: { b: { c: 1, d: 2 }, list: [1, 2] }, keep: true };
    const merged = mergeRecursive(stored, { a: { b: { d: 3, e: 4 }, list: [9] }, n: null });
    expect(merged).toEqual({ a: { b: { c: 1, d: 3, e: 4 }, list: [9] }, keep: true, n: null });
    expect(stored.a.b).toEqual({ c: 1, d: 2 });
    expect(applyUpdate(stored, { a: { x: 1 } }, ['keep'], 'LAST_WRITE_WINS')).toEqual({ a: { x: 1 } });
  });

  it('keeps a __proto__ key a key, never a prototype', () => {
    const updates = JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    const merged = mergeRecursive({}, updates);
    expect(Object.hasOwn(merged, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((merged as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('names the first updated key that holds a different value', () => {
    expect(conflictingKey({ a: { x: 1 }, b: 2 }, { a: { x: 1 }, c: 3 })).toBeUndefined();
    expect(conflictingKey({ a: { x: 1 }, b: 2 }, { a: { x: 2 } })).toBe('a');
  });
});

describe('checkpoint queries', () => {
  it('refuses inverted ranges naming the upper bound', () => {
    const base = { tenant_ids: [], envelope_ids: [], execution_ids: [], types: [], framework_types: [], tags: {} };
    const result = CheckpointQuerySchema.safeParse({ ...base, min_cost_usd: 5, max_cost_usd: 1 });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['max_cost_usd']);
    expect(
      CheckpointQuerySchema.safeParse({ ...base, min_size_bytes: 9, max_size_bytes: 1 }).error?.issues[0]?.path,
    ).toEqual(['max_size_bytes']);
  });

  it("holds its time bounds in the stores' canonical UTC form, and compares them as times", () => {
    const base = { tenant_ids: [], envelope_ids: [], execution_ids: [], types: [], framework_types: [], tags: {} };
    const parsed = CheckpointQuerySchema.parse({
      ...base,
      created_after: '2026-12-01T23:30:00+02:00',
      created_before: '2026-12-01T22:00:00.1234Z',
    });
    expect([parsed.created_after, parsed.created_before]).toEqual([
      '2026-12-01T21:30:00.000Z',
      '2026-12-01T22:00:00.123Z',
    ]);
    const inverted = CheckpointQuerySchema.safeParse({
      ...base,
      created_after: '2026-12-01T21:30:00-02:00',
      created_before: '2026-12-01T22:00:00Z',
    });
    expect(inverted.error?.issues.map((issue) => issue.path)).toEqual([['created_before']]);
    expect(CheckpointQuerySchema.safeParse({ ...base, created_after: 'yesterday' }).error?.issues[0]?.path).toEqual([
      'created_after',
    ]);
  });
});

describe('Checkpoints', () => {
  it('gives versions per execution, prunes the oldest past max_versions, and audits each save', async () => {
    for (let i = 0; i < 4; i++) await save({ checkpoint_id: 'thread', data: { step: i } });
    const fifth = await save({ checkpoint_id: 'thread', data: { step: 4 } }, { max_versions: 3 });
    expect(fifth).toMatchObject({ version: 5, size_bytes: JSON.stringify({ step: 4 }).length, tenant_id: 'acme' });
    const versions = await collectPages((p) => checkpoints.versions('acme', 'exec-1', p));
    expect(versions.map((c) => c.version)).toEqual([5, 4, 3]);
    expect((await checkpoints.get('acme', 'thread', 0)).data).toEqual({ step: 4 });
    expect((await checkpoints.get('acme', 'thread', 3)).data).toEqual({ step: 2 });
    await expect(checkpoints.get('acme', 'thread', 1)).rejects.toMatchObject({ code: 'SVC-SYS-9006' });
    await expect(checkpoints.get('other', 'thread', 0)).rejects.toMatchObject({ code: 'SVC-SYS-9006' });
    const records = (await audit.query('acme', { action: 'checkpoint.save', limit: 10 })).items;
    expect(records).toHaveLength(5);
    expect(records[0]?.metadata).toMatchObject({ version: 5, versions_pruned: 2 });
  });

  it('refuses data over the bound naming checkpoint.data, a missing version, and an envelope of no tenant of the caller', async () => {
    const big = { blob: 'x'.repeat(MAX_CHECKPOINT_DATA_BYTES) };
    await expect(save({ data: big })).rejects.toMatchObject({
      code: 'SVC-SYS-9009',
      fieldViolations: [{ field: 'checkpoint.data' }],
    });
    await expect(save({}, { auto_version: false })).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'checkpoint.version' }],
    });
    await expect(save({ envelope_id: 'env-2' })).rejects.toMatchObject({ code: 'SVC-ENV-1001' });
    await expect(
      checkpoints.save(caller('third'), {
        checkpoint: {
          envelope_id: 'env-1',
          execution_id: 'exec-1',
          version: 1,
          metadata: { type: null, framework_type: null, current_node: null, cost_snapshot_usd: 0, tags: {} },
          data: {},
        },
        auto_version: false,
        max_versions: 0,
      }),
    ).rejects.toMatchObject({ code: 'SVC-ENV-1001' });
    expect((await checkpoints.query('acme', emptyQuery(), 'created_at desc', {})).items).toEqual([]);
  });

  it('soft-deletes (shown by id with deleted_at, left out of lists) and deletes every version on request', async () => {
    const a = await save({ checkpoint_id: 'a' });
    await save({ checkpoint_id: 'b' });
    await checkpoints.delete(ACME, 'a', { soft: true, allVersions: false });
    expect((await checkpoints.get('acme', 'a', 0)).deleted_at).not.toBeNull();
    const listed = await checkpoints.query('acme', emptyQuery(), 'created_at desc', {});
    expect(listed.items.map((c) => c.checkpoint_id)).toEqual(['b']);
    await checkpoints.delete(ACME, 'b', { soft: false, allVersions: true });
    await expect(checkpoints.get('acme', 'a', 0)).rejects.toMatchObject({ code: 'SVC-SYS-9006' });
    await expect(checkpoints.getVersion('acme', 'exec-1', a.version)).rejects.toMatchObject({ code: 'SVC-SYS-9006' });
    await expect(checkpoints.delete(ACME, 'a', { soft: false, allVersions: false })).rejects.toMatchObject({
      code: 'SVC-SYS-9006',
    });
  });

  it('reads only the tenant the call acts for, whatever tenant_ids say', async () => {
    await save();
    expect(
      (await checkpoints.query('acme', { ...emptyQuery(), tenant_ids: ['acme', 'other'] }, 'created_at desc', {}))
        .items,
    ).toHaveLength(1);
    expect(
      (await checkpoints.query('acme', { ...emptyQuery(), tenant_ids: ['other'] }, 'created_at desc', {})).items,
    ).toEqual([]);
    expect((await checkpoints.query('other', emptyQuery(), 'created_at desc', {})).items).toEqual([]);
  });
});

describe('what a tenant can store', () => {
  it('keeps at most the configured versions of an execution when a save sets no max_versions, or a larger one', async () => {
    for (let i = 0; i < 6; i++) await save({ checkpoint_id: 'thread', data: { step: i } });
    await save({ checkpoint_id: 'thread', data: { step: 6 } }, { max_versions: 100 });
    const versions = await collectPages((p) => checkpoints.versions('acme', 'exec-1', p));
    expect(versions.map((c) => c.version)).toEqual([7, 6, 5, 4]);
    const [last] = (await audit.query('acme', { action: 'checkpoint.save', limit: 1 })).items;
    expect(last?.metadata).toMatchObject({ version: 7, versions_pruned: 1 });
  });

  it('refuses a checkpoint of one more execution than the tenant may have, with SVC-ADP-5007', async () => {
    await save({ execution_id: 'exec-1', checkpoint_id: 'a' });
    await save({ execution_id: 'exec-2', checkpoint_id: 'b' });
    const refused = save({ execution_id: 'exec-3', checkpoint_id: 'c' });
    await expect(refused).rejects.toMatchObject({
      code: 'SVC-ADP-5007',
      details: { setting: 'SVC_CHECKPOINT_EXECUTIONS_PER_TENANT', limit: 2 },
    });
    expect(await collectPages((p) => checkpoints.versions('acme', 'exec-3', p))).toEqual([]);
    // Executions that have checkpoints go on saving; another tenant has places of its own.
    expect(await save({ execution_id: 'exec-2', checkpoint_id: 'b' })).toMatchObject({ version: 2 });
    const other = await checkpoints.save(caller('other'), {
      checkpoint: {
        envelope_id: 'env-1',
        execution_id: 'exec-3',
        version: 0,
        metadata: { type: 'AUTO', framework_type: 'langgraph', current_node: null, cost_snapshot_usd: 0, tags: {} },
        data: {},
      },
      auto_version: true,
      max_versions: 0,
    });
    expect(other.version).toBe(1);
  });

  it('refuses the context of one more execution than the tenant may have, with SVC-ADP-5007', async () => {
    await update({ execution_id: 'exec-1', updates: { a: 1 } });
    await update({ execution_id: 'exec-2', updates: { a: 1 } });
    await expect(update({ execution_id: 'exec-3', updates: { a: 1 } })).rejects.toMatchObject({
      code: 'SVC-ADP-5007',
      details: { setting: 'SVC_EXECUTION_CONTEXTS_PER_TENANT', limit: 2 },
    });
    expect((await contexts.get('acme', { execution_id: 'exec-3', keys: [], include_inherited: false })).version).toBe(
      0,
    );
    expect((await update({ execution_id: 'exec-2', updates: { b: 2 } })).version).toBe(2);
    expect((await update({ execution_id: 'exec-3', updates: { a: 1 } }, caller('other'))).version).toBe(1);
  });
});

describe('ExecutionContexts', () => {
  it('is empty at version 0 before the first update, and filters by keys', async () => {
    expect(await contexts.get('acme', { execution_id: 'exec-1', keys: [], include_inherited: false })).toMatchObject({
      values: {},
      version: 0,
    });
    await update({ updates: { a: 1, b: 2, c: 3 } });
    expect(
      await contexts.get('acme', { execution_id: 'exec-1', keys: ['a', 'c', 'zz'], include_inherited: true }),
    ).toMatchObject({
      values: { a: 1, c: 3 },
      version: 1,
    });
    expect((await contexts.get('other', { execution_id: 'exec-1', keys: [], include_inherited: false })).version).toBe(
      0,
    );
  });

  it('applies updates by each strategy with delete_keys, and checks expected_version', async () => {
    await update({ updates: { a: { x: 1, y: 1 }, b: 1, gone: true }, expected_version: 0 });
    const merged = await update({ updates: { a: { y: 2 } }, delete_keys: ['gone'], merge_strategy: 'MERGE_RECURSIVE' });
    expect(merged).toMatchObject({ version: 2, values: { a: { x: 1, y: 2 }, b: 1 } });
    const replaced = await update({ updates: { a: { z: 3 } }, expected_version: 2 });
    expect(replaced.values).toEqual({ a: { z: 3 }, b: 1 });
    await expect(update({ updates: { b: 9 }, expected_version: 2 })).rejects.toMatchObject({
      code: 'SVC-ADP-5006',
      details: { expected_version: 2, version: 3 },
    });
    // FAIL_ON_CONFLICT without a version: equal values pass, a different value is refused.
    expect((await update({ updates: { b: 1, c: 1 }, merge_strategy: 'FAIL_ON_CONFLICT' })).version).toBe(4);
    await expect(update({ updates: { b: 2 }, merge_strategy: 'FAIL_ON_CONFLICT' })).rejects.toMatchObject({
      code: 'SVC-ADP-5006',
      details: { key: 'b' },
    });
    await expect(update({ updates: { b: 2 }, merge_strategy: 'CUSTOM' })).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'merge_strategy' }],
    });
    await expect(update({ updates: { b: 2 }, delete_keys: ['b'] })).rejects.toMatchObject({
      code: 'SVC-SYS-9002',
      fieldViolations: [{ field: 'delete_keys' }],
    });
    await expect(update({ updates: { big: 'x'.repeat(MAX_CONTEXT_BYTES) } })).rejects.toMatchObject({
      code: 'SVC-SYS-9009',
      fieldViolations: [{ field: 'updates' }],
    });
    const after = await contexts.get('acme', { execution_id: 'exec-1', keys: [], include_inherited: false });
    expect(after).toMatchObject({ version: 4, values: { a: { z: 3 }, b: 1, c: 1 } });
    expect((await audit.query('acme', { action: 'execution_context.update', limit: 10 })).items).toHaveLength(4);
  });

  it('lets one of two writers expecting one version through; the other gets SVC-ADP-5006', async () => {
    await update({ updates: { n: 0 } });
    const outcomes = await Promise.allSettled([
      update({ updates: { n: 1 }, expected_version: 1 }),
      update({ updates: { n: 2 }, expected_version: 1 }),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    expect(outcomes.find((o) => o.status === 'rejected')).toMatchObject({ reason: { code: 'SVC-ADP-5006' } });
  });
});

function emptyQuery() {
  return CheckpointQuerySchema.parse({
    tenant_ids: [],
    envelope_ids: [],
    execution_ids: [],
    types: [],
    framework_types: [],
    tags: {},
  });
}
