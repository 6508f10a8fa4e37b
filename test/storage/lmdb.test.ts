import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as turn } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { open } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../core/domain/index.ts';
import { sealAuditRecord } from '../../control-plane/audit/chain.ts';
import { encodedKeySize, LMDB_MAX_KEY_BYTES } from '../../control-plane/storage/lmdb/key-size.ts';
import { LmdbStorage } from '../../control-plane/storage/lmdb/lmdb-storage.ts';
import type { StagedView } from '../../control-plane/storage/lmdb/kv.ts';
import type { Key, Layout } from '../../control-plane/storage/lmdb/layout.ts';
import {
  MIGRATION_BATCH,
  MIGRATIONS,
  SCHEMA_VERSION,
  type Migration,
} from '../../control-plane/storage/lmdb/migrations.ts';
import { FILTER_SCAN_LIMIT } from '../../control-plane/storage/lmdb/pages.ts';
import { envelopeTimeKey, type PageRequest } from '../../control-plane/storage/storage.ts';
import { withOffset } from '../harness/offset-time.ts';
import { timeId } from '../../control-plane/storage/lmdb/checkpoints.ts';
import {
  aBudget,
  aCheckpoint,
  aDetection,
  anApiKey,
  anApproval,
  anAuditDraft,
  anEnvelope,
  anEvent,
  aPolicy,
  at,
} from './records.ts';
import { storageContract } from './repositories.contract.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/**
 * Whether `ref`'s object is collected, once `ready` holds, before `durable` settles: garbage is
 * collected on each turn of the event loop from then on until one of them.
 */
async function goneBeforeDurable(
  durable: Promise<unknown>,
  ready: () => boolean | Promise<boolean>,
  ref: () => WeakRef<object>,
): Promise<boolean> {
  let settled = false;
  void durable.then(() => (settled = true));
  while (!settled && !(await ready())) await turn();
  for (; !settled; await turn()) {
    collectGarbage();
    if (ref().deref() === undefined) return true;
  }
  return false;
}

const dirs: string[] = [];
function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'storage-lmdb-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

storageContract('LMDB', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'storage-contract-'));
  const { storage } = await LmdbStorage.open({ path: dir });
  return {
    storage,
    dispose: async () => {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('the LMDB backend', () => {
  it('opens a data directory written in the released key layout unchanged, and reads every kind of record', async () => {
    const dir = freshDir();
    // Written the way the released control plane wrote its environment.
    const root = open({ path: dir, maxDbs: 8, compression: false });
    const data = root.openDB<unknown, Array<string | number>>({ name: 'tenant_data' });
    const global = root.openDB<unknown, string[]>({ name: 'global' });
    const budget = aBudget('acme');
    const envelope = anEnvelope('acme', { budget_id: budget.budget_id, execution_id: 'exec-1' });
    const policy = aPolicy('acme');
    const key = anApiKey('acme');
    const event = anEvent('acme', { envelope_id: envelope.envelope_id });
    const audit: AuditRecord = sealAuditRecord('acme', undefined, anAuditDraft());
    const pending = anApproval('acme');
    const approved = { ...anApproval('acme'), status: 'APPROVED' as const };
    const checkpoints = [
      aCheckpoint('acme', { execution_id: 'exec-1', version: 1, deleted_at: at() }),
      aCheckpoint('acme', { execution_id: 'exec-1', version: 2, created_at: at(1000) }),
    ];
    await root.transaction(() => {
      void global.put(['meta', 'schema_version'], 1);
      void global.put(['tenant', 'acme'], { tenant_id: 'acme', name: 'Acme', created_at: at() });
      void global.put(['api_key', key.id], 'acme');
      void data.put(['acme', 'budget', budget.budget_id], budget);
      void data.put(['acme', 'envelope', envelope.envelope_id], envelope);
      void data.put(['acme', 'execution', 'exec-1'], envelope.envelope_id);
      void data.put(['acme', 'budget_envelope', `${budget.budget_id}/${envelope.envelope_id}`], envelope.envelope_id);
      void data.put(['acme', 'policy', policy.policy_id], policy);
      void data.put(['acme', 'meta', 'ruleset_version'], 4);
      void data.put(['acme', 'api_key', key.id], key);
      void data.put(['acme', 'event', event.event_id], event);
      void data.put(['acme', 'event_log', '000000000000001'], event.event_id);
      void data.put(['acme', 'envelope_event', `${envelope.envelope_id}/000000000000001`], event.event_id);
      void data.put(['acme', 'meta', 'event_seq'], 1);
      void data.put(['acme', 'audit', 1], audit);
      void data.put(['acme', 'meta', 'audit_head'], { seq: 1, hash: audit.hash });
      void data.put(['acme', 'lease', `report/${budget.budget_id}/proxy-1`], { seq: 3 });
      void data.put(['acme', 'approval', pending.approval_id], pending);
      void data.put(['acme', 'approval', approved.approval_id], approved);
      for (const c of checkpoints) {
        void data.put(['acme', 'checkpoint', c.execution_id, c.version], c);
        void data.put(['acme', 'checkpoint_time', timeId(c)], [c.execution_id, c.version]);
        void data.put(['acme', 'checkpoint_ref', c.checkpoint_id, c.version], c.execution_id);
      }
      void data.put(['acme', 'checkpoint_head', 'exec-1'], 2);
    });
    await root.close();

    const { storage, applied } = await LmdbStorage.open({ path: dir });
    try {
      // Version 2 indexes the envelopes found by creation time; 3 stamps report numbers as counted
      // then; 4 gives each envelope's events and each budget's live envelopes a range of their own;
      // 5 indexes the approvals by status; 6 writes checkpoint summaries and the per-execution time
      // index; 7 changes no record (those written before are read as they are); 8 puts envelope
      // times in the canonical form.
      const migrating = Date.now();
      expect(applied).toEqual([2, 3, 4, 5, 6, 7, 8]);
      expect(await storage.schemaVersion()).toBe(8);
      expect((await storage.read.approvals.list('acme', { status: 'PENDING' })).items).toEqual([pending]);
      expect((await storage.read.approvals.list('acme', { status: 'APPROVED' })).items).toEqual([approved]);
      const [mark] = await storage.read.leases.reports('acme', budget.budget_id);
      expect(mark).toMatchObject({ holder: 'proxy-1', seq: 3 });
      expect(Date.parse(mark!.counted_at)).toBeGreaterThanOrEqual(migrating - 60_000);
      const r = storage.read;
      expect(await r.tenants.get('acme')).toMatchObject({ name: 'Acme' });
      expect(await r.apiKeys.tenantOf(key.id)).toBe('acme');
      expect(await r.apiKeys.get('acme', key.id)).toEqual(key);
      expect(await r.budgets.get('acme', budget.budget_id)).toEqual(budget);
      expect((await r.envelopes.listLive('acme', budget.budget_id)).items).toEqual([envelope]);
      expect((await r.envelopes.listNewest('acme', {})).items).toEqual([envelope]);
      expect(await r.policies.version('acme')).toBe(4);
      expect((await r.policies.list('acme')).items).toEqual([policy]);
      expect((await r.events.list('acme', { envelopeId: envelope.envelope_id })).items).toEqual([event]);
      expect((await r.audit.list('acme', { order: 'oldest' })).items).toEqual([audit]);
      expect((await r.checkpoints.versions('acme', 'exec-1')).items).toEqual([checkpoints[1]]);
      const byExecution = { executionIds: ['exec-1'], includeDeleted: true };
      expect((await r.checkpoints.query('acme', byExecution, 'created_at asc')).items).toEqual(checkpoints);
      expect((await r.checkpoints.query('acme', { tags: {} }, 'created_at desc')).items).toEqual([checkpoints[1]]);
      // Continues the sequences it found: execution ids, events, the audit chain.
      await expect(
        storage.withTransaction((t) =>
          t.envelopes.insert('acme', anEnvelope('acme', { execution_id: 'exec-1' }), { executionTaken: 'refuse' }),
        ),
      ).rejects.toMatchObject({ code: 'SVC-SYS-9008' });
      const next = anEvent('acme', { envelope_id: envelope.envelope_id });
      await storage.withTransaction(async (t) => {
        await t.events.insertNew('acme', [next]);
        await t.audit.append('acme', anAuditDraft());
      });
      expect((await r.events.list('acme', {})).items.map((e) => e.event_id)).toEqual([next.event_id, event.event_id]);
      expect((await r.audit.list('acme', { order: 'newest' })).items[0]).toMatchObject({
        seq: 2,
        prev_hash: audit.hash,
      });
    } finally {
      await storage.close();
    }
  });

  it('moves the per-envelope and per-budget indexes of a version 3 store apart, ids holding "/" included', async () => {
    const dir = freshDir();
    const root = open({ path: dir, maxDbs: 8, compression: false });
    const data = root.openDB<unknown, Array<string | number>>({ name: 'tenant_data' });
    const global = root.openDB<unknown, string[]>({ name: 'global' });
    const envelopes = ['U', 'U/1'].map((id) => anEnvelope('acme', { envelope_id: id, budget_id: id }));
    const events = envelopes.map((e) => anEvent('acme', { envelope_id: e.envelope_id }));
    await root.transaction(() => {
      void global.put(['meta', 'schema_version'], 3);
      for (const [i, envelope] of envelopes.entries()) {
        const position = String(i + 1).padStart(15, '0');
        void data.put(['acme', 'envelope', envelope.envelope_id], envelope);
        void data.put(
          ['acme', 'budget_envelope', `${envelope.budget_id}/${envelope.envelope_id}`],
          envelope.envelope_id,
        );
        void data.put(['acme', 'event', events[i]!.event_id], events[i]);
        void data.put(['acme', 'event_log', position], events[i]!.event_id);
        void data.put(['acme', 'envelope_event', `${envelope.envelope_id}/${position}`], events[i]!.event_id);
      }
      void data.put(['acme', 'meta', 'event_seq'], 2);
    });
    await root.close();
    const { storage, applied } = await LmdbStorage.open({ path: dir });
    try {
      expect(applied).toEqual([4, 5, 6, 7, 8]);
      for (const [i, envelope] of envelopes.entries()) {
        const { envelope_id: envelopeId, budget_id: budgetId } = envelope;
        expect((await storage.read.events.list('acme', { envelopeId })).items).toEqual([events[i]]);
        expect((await storage.read.envelopes.listLive('acme', budgetId!)).items).toEqual([envelope]);
      }
      // Retention finds the moved entries: nothing of an envelope's list outlives its event.
      await storage.withTransaction((t) => t.events.removeReceivedBefore('acme', at(60_000), 10));
      expect((await storage.read.events.list('acme', { envelopeId: 'U' })).items).toEqual([]);
    } finally {
      await storage.close();
    }
  });

  it('puts the envelope times of a version 7 store in the canonical form, re-keyed in time order, over several batches', async () => {
    const dir = freshDir();
    const root = open({ path: dir, maxDbs: 8, compression: false });
    const data = root.openDB<unknown, Array<string | number>>({ name: 'tenant_data' });
    const global = root.openDB<unknown, string[]>({ name: 'global' });
    // Envelope i was created i seconds after the first, written east of UTC for odd i: by text,
    // those sort after every later envelope written in UTC. More than a batch of them.
    const count = MIGRATION_BATCH + 2;
    const written = Array.from({ length: count }, (_, i) => {
      const created = at(i * 1000);
      return anEnvelope(i % 3 === 0 ? 'acme' : 'beta', {
        created_at: i % 2 === 1 ? withOffset(created, 600) : created.replace('.000Z', 'Z'),
        updated_at: withOffset(at(i * 1000 + 1), -90),
        completed_at: i === 0 ? withOffset(at(5), 60) : null,
      });
    });
    await root.transaction(() => {
      void global.put(['meta', 'schema_version'], 7);
      for (const e of written) {
        void data.put([e.tenant_id, 'envelope', e.envelope_id], e);
        void data.put([e.tenant_id, 'envelope_time', envelopeTimeKey(e)], e.envelope_id);
      }
    });
    await root.close();
    const { storage, applied } = await LmdbStorage.open({ path: dir });
    try {
      expect(applied).toEqual([8]);
      for (const tenant of ['acme', 'beta']) {
        const mine = written.filter((e) => e.tenant_id === tenant);
        const listed = await storage.read.envelopes.listNewest(tenant, {}, { pageSize: 100 });
        const expected = mine
          .map((e) => ({ id: e.envelope_id, created: new Date(Date.parse(e.created_at)).toISOString() }))
          .reverse();
        expect(listed.items.map((e) => ({ id: e.envelope_id, created: e.created_at }))).toEqual(expected.slice(0, 100));
        let pages = 0;
        let token: string | null = listed.nextPageToken;
        for (; token !== null; pages++)
          token = (await storage.read.envelopes.listNewest(tenant, {}, { pageSize: 100, pageToken: token }))
            .nextPageToken;
        // No key of the old spelling is left in the index: it holds each envelope once.
        expect(pages).toBe(Math.ceil(mine.length / 100) - 1);
      }
      const first = await storage.read.envelopes.get('acme', written[0]!.envelope_id);
      expect(first).toMatchObject({
        created_at: at(0),
        updated_at: at(1),
        completed_at: at(5),
      });
    } finally {
      await storage.close();
    }
  });

  it("reads only the envelopes of a version 7 store, every tenant's, when it puts their times in the canonical form", async () => {
    const dir = freshDir();
    const root = open({ path: dir, maxDbs: 8, compression: false });
    const data = root.openDB<unknown, Array<string | number>>({ name: 'tenant_data' });
    const global = root.openDB<unknown, string[]>({ name: 'global' });
    // Two tenants with envelopes, more than a batch of them, others' records before and after
    // them in key order, and a tenant with events only.
    const written = Array.from({ length: 800 }, (_, i) =>
      anEnvelope(i < 400 ? 'acme' : 'gamma', { created_at: withOffset(at(i * 1000), 60) }),
    );
    await root.transaction(() => {
      void global.put(['meta', 'schema_version'], 7);
      for (const e of written) {
        void data.put([e.tenant_id, 'envelope', e.envelope_id], e);
        void data.put([e.tenant_id, 'envelope_time', envelopeTimeKey(e)], e.envelope_id);
      }
      for (const tenant of ['acme', 'beta', 'gamma']) {
        void data.put([tenant, 'budget', 'b-1'], { budget_id: 'b-1' });
        for (let i = 0; i < 500; i++) void data.put([tenant, 'event', `ev-${i}`], anEvent(tenant));
      }
    });
    await root.close();
    const kindsRead = new Set<unknown>();
    const migrations = MIGRATIONS.map((m) =>
      m.version !== 8
        ? m
        : { ...m, up: (kv: StagedView, layout: Layout, from?: Key) => m.up(kv, watched(layout), from) },
    );
    /** A property of `target`, its methods bound to it: their own calls are not watched. */
    function bound(target: object, property: string | symbol): unknown {
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    }
    /** The layout, with what its `tenant_data` ranges hand out noted by kind. */
    function watched(layout: Layout): Layout {
      const data = new Proxy(layout.data, {
        get(target, property) {
          if (property !== 'getRange') return bound(target, property);
          return (...args: Parameters<typeof target.getRange>) =>
            (function* () {
              for (const entry of target.getRange(...args)) {
                kindsRead.add(entry.key[1]);
                yield entry;
              }
            })();
        },
      });
      return new Proxy(layout, {
        get(target, property) {
          return property === 'data' ? data : bound(target, property);
        },
      });
    }
    const { storage, applied } = await LmdbStorage.open({ path: dir, migrations });
    try {
      expect(applied).toEqual([8]);
      expect([...kindsRead]).toEqual(['envelope']);
      for (const e of written)
        expect((await storage.read.envelopes.get(e.tenant_id, e.envelope_id))?.created_at).toBe(
          new Date(Date.parse(e.created_at)).toISOString(),
        );
    } finally {
      await storage.close();
    }
  });

  it('keeps, under retention, the de-duplication entries written before they carried a time', async () => {
    const dir = freshDir();
    const root = open({ path: dir, maxDbs: 8, compression: false });
    const data = root.openDB<unknown, Array<string | number>>({ name: 'tenant_data' });
    await root.transaction(() => {
      void data.put(['acme', 'meta', 'violation/legacy'], true);
      void data.put(['acme', 'meta', 'violation/old'], at(-40 * 86_400_000));
    });
    await root.close();
    const { storage } = await LmdbStorage.open({ path: dir });
    try {
      const removed = await storage.withTransaction((t) =>
        t.dedup.removeProcessedBefore('acme', 'violation', at(-30 * 86_400_000), null, 10),
      );
      expect(removed).toEqual({ removed: 1, next: null });
      const again = (id: string) =>
        storage.withTransaction((t) => t.dedup.markProcessed('acme', 'violation', id, at()));
      expect(await again('legacy')).toBe(false);
      expect(await again('old')).toBe(true);
    } finally {
      await storage.close();
    }
  });

  it('keeps what was committed across a reopen', async () => {
    const dir = freshDir();
    const budget = aBudget('acme');
    const first = await LmdbStorage.open({ path: dir });
    expect(first.applied).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    await first.storage.withTransaction((t) => t.budgets.insert('acme', budget));
    await first.storage.withTransaction((t) => t.outbox.append([{ id: 'm', subject: 'svc.acme.events.x', data: {} }]));
    await first.storage.close();
    const second = await LmdbStorage.open({ path: dir });
    try {
      expect(second.applied).toEqual([]);
      expect(await second.storage.read.budgets.get('acme', budget.budget_id)).toEqual(budget);
      expect((await second.storage.outbox.claim(10)).entries.map((e) => e.event.id)).toEqual(['m']);
    } finally {
      await second.storage.close();
    }
  });

  it('writes records as msgpack maps, reads those written as records with inline structures beside them', async () => {
    const dir = freshDir();
    const written = aBudget('acme');
    const earlier = aBudget('acme');
    const first = await LmdbStorage.open({ path: dir });
    await first.storage.withTransaction((t) => t.budgets.insert('acme', written));
    await first.storage.close();
    // Opened as builds before schema version 7 opened it.
    const root = open({ path: dir, maxDbs: 8, compression: false });
    const data = root.openDB<unknown, Array<string | number>>({ name: 'tenant_data' });
    const global = root.openDB<unknown, string[]>({ name: 'global' });
    const MSGPACK_MAP16 = 0xde;
    expect(data.getBinary(['acme', 'budget', written.budget_id])?.[0]).toBe(MSGPACK_MAP16);
    // Such a build would read a map as a `Map`: the schema version makes it refuse the store instead.
    expect(data.get(['acme', 'budget', written.budget_id])).toBeInstanceOf(Map);
    expect(global.get(['meta', 'schema_version'])).toBe(SCHEMA_VERSION);
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(7);
    await data.put(['acme', 'budget', earlier.budget_id], earlier);
    await root.close();
    const second = await LmdbStorage.open({ path: dir });
    try {
      expect(await second.storage.read.budgets.get('acme', written.budget_id)).toEqual(written);
      expect(await second.storage.read.budgets.get('acme', earlier.budget_id)).toEqual(earlier);
    } finally {
      await second.storage.close();
    }
  });

  it('applies numbered migrations once, in order, and refuses a directory of a newer schema', async () => {
    const dir = freshDir();
    const seen: number[] = [];
    const migrations: Migration[] = [
      { version: 2, name: 'two', up: () => void seen.push(2) },
      { version: 1, name: 'one', up: () => void seen.push(1) },
    ];
    const first = await LmdbStorage.open({ path: dir, migrations });
    expect(first.applied).toEqual([1, 2]);
    expect(await first.storage.schemaVersion()).toBe(2);
    await first.storage.close();
    const again = await LmdbStorage.open({ path: dir, migrations });
    expect(again.applied).toEqual([]);
    expect(seen).toEqual([1, 2]);
    await again.storage.close();
    await expect(LmdbStorage.open({ path: dir, migrations: migrations.slice(1) })).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
      message: expect.stringContaining('newer than this build knows'),
    });
  });

  it('refuses a second storage on an environment open in this process, and opens it again once closed', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    await expect(LmdbStorage.open({ path: join(dir, '.') })).rejects.toThrow(/open already/);
    await storage.close();
    const again = await LmdbStorage.open({ path: dir });
    await again.storage.close();
  });

  it('writes a record changed many times in one transaction once, with its last value', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const budget = aBudget('acme');
    const delta = { tokens_input: 1, tokens_output: 0, cost_micros: 1, executions: 0, llm_calls: 1, tool_calls: 0 };
    const period = { start: budget.usage.period_start, end: budget.usage.period_end };
    try {
      await storage.withTransaction(async (t) => {
        await t.budgets.insert('acme', budget);
        for (let i = 0; i < 500; i++) await t.budgets.addUsage('acme', budget.budget_id, delta, period, 'refuse', at());
        expect((await t.budgets.get('acme', budget.budget_id))?.usage.llm_calls).toBe(500);
        expect(await storage.read.budgets.get('acme', budget.budget_id)).toBeUndefined();
      });
      expect((await storage.read.budgets.get('acme', budget.budget_id))?.usage.llm_calls).toBe(500);
      // One writer: a transaction waits for the one before, reads after it commit see it.
      const order: string[] = [];
      await Promise.all([
        storage.withTransaction(async () => {
          await new Promise((resolve) => setTimeout(resolve, 30));
          order.push('first');
        }),
        storage.withTransaction(() => Promise.resolve(void order.push('second'))),
      ]);
      expect(order).toEqual(['first', 'second']);
    } finally {
      await storage.close();
    }
  });

  it('reads and keeps, across transactions committed together, what each wrote over the ones before it', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const budget = aBudget('acme');
    const removed = aBudget('acme');
    const delta = { tokens_input: 1, tokens_output: 0, cost_micros: 1, executions: 0, llm_calls: 1, tool_calls: 0 };
    const period = { start: budget.usage.period_start, end: budget.usage.period_end };
    try {
      // Started together, they run one after another while the first group's commit is under way,
      // so most of them share a group: each reads the writes of those before it.
      const seen = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          storage.withTransaction(async (t) => {
            if (i === 0) {
              await t.budgets.insert('acme', budget);
              await t.budgets.insert('acme', removed);
            }
            if (i === 20) await t.budgets.remove('acme', removed.budget_id);
            const before = (await t.budgets.get('acme', budget.budget_id))?.usage.llm_calls;
            await t.budgets.addUsage('acme', budget.budget_id, delta, period, 'refuse', at());
            return { before, removedThere: (await t.budgets.get('acme', removed.budget_id)) !== undefined };
          }),
        ),
      );
      expect(seen.map((s) => s.before)).toEqual(Array.from({ length: 40 }, (_, i) => i));
      expect(seen.map((s) => s.removedThere)).toEqual(Array.from({ length: 40 }, (_, i) => i < 20));
      expect((await storage.read.budgets.get('acme', budget.budget_id))?.usage.llm_calls).toBe(40);
      expect(await storage.read.budgets.get('acme', removed.budget_id)).toBeUndefined();
      expect((await storage.read.budgets.list('acme')).items.map((b) => b.budget_id)).toEqual([budget.budget_id]);
    } finally {
      await storage.close();
    }
  });

  it('has a transaction wait, while the open commit group holds 8,192 records, for that group to be written', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const batches = Array.from({ length: 12 }, () => Array.from({ length: 1_000 }, () => anEvent('acme')));
    try {
      // Started together, as a drain that never yields to the event loop starts them: without a
      // bound, all of them would wait in one group, none of it written until the last had run.
      const committedBefore = await Promise.all(
        batches.map((events) =>
          storage.withTransaction(async (t) => {
            const earlier = await storage.read.events.get('acme', batches[0]![0]!.event_id);
            // Three records an event: the event and its two indexes.
            expect(await t.events.insertNew('acme', events)).toHaveLength(events.length);
            return earlier !== undefined;
          }),
        ),
      );
      // Three transactions a group (the third passes the bound); the third group's transactions
      // begin only once the second group is taken to be written, so after the first is written.
      expect(committedBefore.slice(0, 3)).toEqual([false, false, false]);
      expect(committedBefore.slice(6)).toEqual([true, true, true, true, true, true]);
      for (const events of batches)
        expect(await storage.read.events.get('acme', events.at(-1)!.event_id)).toEqual(events.at(-1));
    } finally {
      await storage.close();
    }
  });

  it('keeps nothing the transaction used while its commit becomes durable', async () => {
    const { storage } = await LmdbStorage.open({ path: freshDir() });
    let ended = false;
    try {
      // What the function closes over, as the event processor's closes over the batch it validated.
      const { used, durable } = (() => {
        const held = { events: [anEvent('acme')] };
        const run = storage.withTransaction(async (t) => {
          await t.events.insertNew('acme', held.events);
          ended = true;
        });
        return { used: new WeakRef(held), durable: run };
      })();
      expect(
        await goneBeforeDurable(
          durable,
          () => ended,
          () => used,
        ),
      ).toBe(true);
      await durable;
    } finally {
      await storage.close();
    }
  });

  it('writes none of a commit group when one of its writes fails, and goes on with the next', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const kept = aBudget('acme');
    const fine = aBudget('acme');
    // Refused only by the encoder, at the commit: an integer MessagePack cannot hold (no surface
    // lets one through).
    const unwritable = aBudget('acme', { name: (10n ** 30n) as unknown as string });
    try {
      await expect(
        storage.withTransaction(async (t) => {
          await t.budgets.insert('acme', kept);
          await t.budgets.insert('acme', unwritable);
        }),
      ).rejects.toThrow(/too large to fit in MessagePack/);
      expect(await storage.read.budgets.get('acme', kept.budget_id)).toBeUndefined();
      await storage.withTransaction((t) => t.budgets.insert('acme', fine));
      expect(await storage.read.budgets.get('acme', fine.budget_id)).toEqual(fine);
    } finally {
      await storage.close();
    }
    const reopened = await LmdbStorage.open({ path: dir });
    try {
      expect(await reopened.storage.read.budgets.get('acme', kept.budget_id)).toBeUndefined();
      expect(await reopened.storage.read.budgets.get('acme', fine.budget_id)).toEqual(fine);
    } finally {
      await reopened.storage.close();
    }
  });

  it('refuses a key too long for LMDB in its own transaction, leaving the others of its group to commit', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const now = at();
    const spend = (tenant: string) =>
      storage.withTransaction((t) => t.leases.addSpend(tenant, 'b1', now, 'reported', { tokens: 1, micros: 1 }));
    try {
      const [before, refused, after] = await Promise.allSettled([
        spend('victim1'),
        storage.withTransaction((t) => t.leases.claimReport('evil', 'b1', 'h'.repeat(3000), 1, now)),
        spend('victim2'),
      ]);
      expect(refused).toMatchObject({ status: 'rejected', reason: { code: 'SVC-SYS-9009' } });
      expect([before.status, after.status]).toEqual(['fulfilled', 'fulfilled']);
      for (const tenant of ['victim1', 'victim2'])
        expect(await storage.read.leases.pendingSpend(tenant, 'b1', now)).toMatchObject({ tokens: 1, micros: 1 });
    } finally {
      await storage.close();
    }
  });

  it('stores a key of exactly the largest size LMDB takes, and refuses one byte more before the commit', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    // The key is [tenant, kind, id]; its parts and separators take the rest of the bytes.
    const overhead = encodedKeySize(['acme', 'budget', '']) - 1;
    const room = LMDB_MAX_KEY_BYTES - overhead;
    const largest = aBudget('acme', { budget_id: 'é'.repeat(Math.floor(room / 2)) + 'b'.repeat(room % 2) });
    const past = aBudget('acme', { budget_id: `${largest.budget_id}b` });
    try {
      await storage.withTransaction((t) => t.budgets.insert('acme', largest));
      expect(await storage.read.budgets.get('acme', largest.budget_id)).toEqual(largest);
      await expect(storage.withTransaction((t) => t.budgets.insert('acme', past))).rejects.toMatchObject({
        code: 'SVC-SYS-9009',
      });
    } finally {
      await storage.close();
    }
  });

  it('refuses a record too deep to encode in its own transaction, leaving the others of its group to commit', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const budget = aBudget('other');
    let deep: unknown = 1;
    for (let i = 0; i < 5000; i++) deep = { a: deep };
    try {
      const [kept, refused] = await Promise.allSettled([
        storage.withTransaction((t) => t.budgets.insert('other', budget)),
        storage.withTransaction((t) => t.events.insertNew('acme', [anEvent('acme', { payload: { deep } })])),
      ]);
      expect(kept.status).toBe('fulfilled');
      expect(refused).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/nests deeper/) } });
      expect(await storage.read.budgets.get('other', budget.budget_id)).toEqual(budget);
    } finally {
      await storage.close();
    }
  });

  it('runs concurrent transactions in order, each over the staged writes of those before, and answers each once committed', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    const budget = aBudget('acme');
    const delta = { tokens_input: 0, tokens_output: 0, cost_micros: 1, executions: 0, llm_calls: 1, tool_calls: 0 };
    const period = { start: budget.usage.period_start, end: budget.usage.period_end };
    try {
      await storage.withTransaction((t) => t.budgets.insert('acme', budget));
      const seen: number[] = [];
      const stored: number[] = [];
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          storage
            .withTransaction(async (t) => {
              // What the transactions before this one staged, committed or not yet, is read here.
              seen.push((await t.budgets.get('acme', budget.budget_id))!.usage.llm_calls);
              await t.budgets.addUsage('acme', budget.budget_id, delta, period, 'refuse', at());
              await t.outbox.append([{ id: `m${i}`, subject: 'svc.acme.events.x', data: {} }]);
            })
            .then(async () => {
              // Answered only once committed: the reads outside transactions see at least this one.
              stored.push((await storage.read.budgets.get('acme', budget.budget_id))!.usage.llm_calls);
            }),
        ),
      );
      expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => i));
      expect(Math.min(...stored)).toBeGreaterThanOrEqual(1);
      for (const [i, n] of stored.entries()) expect(n, `answer ${i}`).toBeGreaterThanOrEqual(i + 1);
      expect((await storage.outbox.claim(100)).entries.map((e) => e.event.id)).toEqual(
        Array.from({ length: 50 }, (_, i) => `m${i}`),
      );
    } finally {
      await storage.close();
    }
  });

  it('reads at most FILTER_SCAN_LIMIT records for one filtered page, and ends it there with a token that goes on', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    try {
      const rare = anEvent('acme', { event_type: 'tool.call' });
      const common = Array.from({ length: FILTER_SCAN_LIMIT + 5 }, () => anEvent('acme', { event_type: 'llm.call' }));
      await storage.withTransaction(async (t) => {
        await t.events.insertNew('acme', [rare, ...common]);
        await t.audit.append('acme', anAuditDraft('policy.update'));
        for (let i = 0; i < FILTER_SCAN_LIMIT + 5; i++) await t.audit.append('acme', anAuditDraft('envelope.create'));
      });
      // The match lies past the bound: the first page stops short of it, empty, and the next finds it.
      const first = await storage.read.events.list('acme', { eventType: 'tool.call' }, { pageSize: 10 });
      expect(first.items).toEqual([]);
      expect(first.nextPageToken).not.toBeNull();
      const second = await storage.read.events.list(
        'acme',
        { eventType: 'tool.call' },
        { pageSize: 10, pageToken: first.nextPageToken },
      );
      expect(second).toEqual({ items: [rare], nextPageToken: null });
      const audit = await storage.read.audit.list(
        'acme',
        { order: 'newest', action: 'policy.update' },
        { pageSize: 10 },
      );
      expect(audit.items).toEqual([]);
      expect(audit.nextPageToken).not.toBeNull();
      const rest = await storage.read.audit.list(
        'acme',
        { order: 'newest', action: 'policy.update' },
        { pageSize: 10, pageToken: audit.nextPageToken },
      );
      expect(rest.items.map((r) => r.seq)).toEqual([1]);
      expect(rest.nextPageToken).toBeNull();
    } finally {
      await storage.close();
    }
  });

  it('ends a filtered page of envelopes, of the newest envelopes or of detections at FILTER_SCAN_LIMIT records read', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    try {
      const count = FILTER_SCAN_LIMIT + 5;
      // The one match is the last in each list's order: past the bound from the first page.
      const envelopes = Array.from({ length: count }, (_, i) =>
        anEnvelope('acme', {
          envelope_id: `e-${String(i).padStart(5, '0')}`,
          created_at: at(count - i),
          status: i === count - 1 ? 'PAUSED' : 'RUNNING',
        }),
      );
      const detections = Array.from({ length: count }, (_, i) =>
        aDetection('acme', {
          detected_at: at(i * 1000),
          recorded_at: at(i * 1000),
          kind: i === 0 ? 'sequence' : 'call_rate',
        }),
      );
      await storage.withTransaction(async (t) => {
        await t.envelopes.insertMany('acme', envelopes);
        for (const d of detections) await t.detections.insert('acme', d);
      });
      const lists = [
        (page: PageRequest) => storage.read.envelopes.list('acme', { status: 'PAUSED' }, page),
        (page: PageRequest) => storage.read.envelopes.listNewest('acme', { statuses: ['PAUSED'] }, page),
        (page: PageRequest) => storage.read.detections.list('acme', { kind: 'sequence' }, page),
      ];
      for (const list of lists) {
        const first = await list({ pageSize: 10 });
        expect(first.items).toEqual([]);
        expect(first.nextPageToken).not.toBeNull();
        const second = await list({ pageSize: 10, pageToken: first.nextPageToken });
        expect(second.items).toHaveLength(1);
        expect(second.nextPageToken).toBeNull();
      }
    } finally {
      await storage.close();
    }
  });

  it('ends a page of checkpoints at FILTER_SCAN_LIMIT summaries read, and reads an execution from its own range', async () => {
    const dir = freshDir();
    const { storage } = await LmdbStorage.open({ path: dir });
    try {
      const count = FILTER_SCAN_LIMIT + 5;
      const mine = aCheckpoint('acme', { execution_id: 'mine', created_at: at(-1000) });
      const kept = aCheckpoint('acme', { execution_id: 'gone', created_at: at(-2000) });
      await storage.withTransaction(async (t) => {
        await t.checkpoints.insert('acme', mine, 'given');
        await t.checkpoints.insert('acme', kept, 'given');
        for (let i = 0; i < count; i++)
          await t.checkpoints.insert(
            'acme',
            aCheckpoint('acme', { execution_id: `other-${i}`, created_at: at(i) }),
            'given',
          );
        for (let v = 2; v <= count; v++)
          await t.checkpoints.insert(
            'acme',
            aCheckpoint('acme', { execution_id: 'gone', version: v, deleted_at: at() }),
            'given',
          );
      });
      const r = storage.read.checkpoints;
      const first = await r.query('acme', { tags: { nope: 'x' } }, 'created_at desc', { pageSize: 10 });
      expect(first.items).toEqual([]);
      expect(first.nextPageToken).not.toBeNull();
      const versions = await r.versions('acme', 'gone', { pageSize: 10 });
      expect(versions.items).toEqual([]);
      expect(versions.nextPageToken).not.toBeNull();
      expect(await r.versions('acme', 'gone', { pageSize: 10, pageToken: versions.nextPageToken })).toEqual({
        items: [kept],
        nextPageToken: null,
      });
      // Past every other execution's checkpoints in the query order, yet found on the first page.
      expect(await r.query('acme', { executionIds: ['mine'] }, 'created_at desc', { pageSize: 10 })).toEqual({
        items: [mine],
        nextPageToken: null,
      });
    } finally {
      await storage.close();
    }
  });
});
