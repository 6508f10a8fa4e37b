import { randomBytes, randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../control-plane/audit/audit-log.ts';
import { batchRepositories } from '../../control-plane/processor/batch-repositories.ts';
import { loadMigrations } from '../../control-plane/storage/postgres/migrate.ts';
import { PostgresStorage } from '../../control-plane/storage/postgres/postgres-storage.ts';
import type { Storage } from '../../control-plane/storage/storage.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { eventually, startControlPlane, tenantWithKey } from '../harness/control-plane.ts';
import { withOffset } from '../harness/offset-time.ts';
import { createTestDatabase, postgresReachable, truncateAll, type TestDatabase } from '../harness/postgres.ts';
import { aBudget, aCharge, aCheckpoint, anAuditDraft, anEnvelope, at } from './records.ts';
import { storageContract } from './repositories.contract.ts';

const available = await postgresReachable();
const MONTH = { start: '2026-03-01T00:00:00.000Z', end: '2026-04-01T00:00:00.000Z' };
const ZERO = { tokens_input: 0, tokens_output: 0, cost_micros: 0, executions: 0, llm_calls: 0, tool_calls: 0 };

describe.skipIf(!available)('PostgreSQL', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  storageContract('PostgreSQL', async () => {
    const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 4 });
    await truncateAll(database.url);
    return { storage, dispose: () => storage.close() };
  });

  it('leaves room on each page of envelopes, so that a charge rewrites the row where it is', async () => {
    const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 1 });
    const pool = new Pool({ connectionString: database.url, max: 1 });
    try {
      await truncateAll(database.url);
      // More than a page of them: the first page is as full as the table lets inserts make it.
      const envelopes = Array.from({ length: 60 }, () => anEnvelope('acme'));
      await storage.withTransaction(async (t) => {
        for (const e of envelopes) await t.envelopes.insert('acme', e, { executionTaken: 'refuse' });
      });
      const pageOf = async (id: string): Promise<string> =>
        (
          await pool.query<{ page: string }>(
            'SELECT (ctid::text::point)[0]::text AS page FROM envelopes WHERE envelope_id = $1',
            [id],
          )
        ).rows[0]!.page;
      const first = envelopes[0]!.envelope_id;
      const before = await pageOf(first);
      await storage.withTransaction((t) =>
        t.envelopes.chargeMany('acme', [{ envelopeId: first, delta: aCharge('gpt-4o'), updatedAt: at(1) }]),
      );
      expect(await pageOf(first)).toBe(before);
    } finally {
      await pool.end();
      await storage.close();
    }
  });

  it('gives an execution id that envelopes of one insertMany share to the first of them', async () => {
    const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 1 });
    const pool = new Pool({ connectionString: database.url, max: 1 });
    try {
      await truncateAll(database.url);
      // Many, so that an order PostgreSQL chose itself would show.
      const envelopes = Array.from({ length: 40 }, (_, i) => anEnvelope('acme', { execution_id: `exec-${i % 4}` }));
      const stored = await storage.withTransaction((t) => t.envelopes.insertMany('acme', envelopes));
      expect(stored).toHaveLength(40);
      const { rows } = await pool.query<{ execution_id: string; envelope_id: string }>(
        'SELECT execution_id, envelope_id FROM executions ORDER BY execution_id',
      );
      expect(rows).toEqual(
        envelopes.slice(0, 4).map((e) => ({ execution_id: e.execution_id, envelope_id: e.envelope_id })),
      );
    } finally {
      await pool.end();
      await storage.close();
    }
  });

  describe('two replicas on one database', () => {
    let one: Storage;
    let two: Storage;
    const extra: TestDatabase[] = [];
    beforeAll(async () => {
      await truncateAll(database.url);
      // Two pools, as two control-plane processes have.
      one = (await PostgresStorage.open({ connectionString: database.url, poolSize: 4 })).storage;
      two = (await PostgresStorage.open({ connectionString: database.url, poolSize: 4 })).storage;
    });
    afterAll(async () => {
      await one?.close();
      await two?.close();
    });
    afterEach(async () => {
      for (const db of extra.splice(0)) await db.drop();
    });

    /** `n` transactions on each replica at once, alternating. */
    const both = <T>(n: number, fn: (storage: Storage, i: number) => Promise<T>): Promise<T[]> =>
      Promise.all(Array.from({ length: 2 * n }, (_, i) => fn(i % 2 === 0 ? one : two, i)));

    it('fail a batch whose new envelope the other stored meanwhile, leaving nothing of the batch', async () => {
      const envelope = anEnvelope('acme');
      const theirs = { ...envelope, adapter_type: 'theirs' };
      const attempt = one.withTransaction(async (t) => {
        const batch = batchRepositories(t);
        expect(await batch.tx.envelopes.get('acme', envelope.envelope_id)).toBeUndefined();
        expect(await batch.tx.envelopes.insert('acme', envelope, { executionTaken: 'keep' })).toBe(true);
        await batch.tx.envelopes.charge('acme', envelope.envelope_id, aCharge('gpt-4o'), 'saturate', at(1));
        await two.withTransaction((u) => u.envelopes.insert('acme', theirs, { executionTaken: 'keep' }));
        await batch.flush();
      });
      await expect(attempt).rejects.toMatchObject({ code: 'SVC-EVT-4001' });
      expect(await one.read.envelopes.get('acme', envelope.envelope_id)).toEqual(theirs);
    });

    it('lose no budget update and never reserve past the execution limit', async () => {
      const budget = aBudget('acme', { limits: { ...aBudget('acme').limits, max_executions: 25 } });
      await one.withTransaction((t) => t.budgets.insert('acme', budget));
      await both(40, (s, i) =>
        s.withTransaction((t) =>
          t.budgets.addUsage(
            'acme',
            budget.budget_id,
            { ...ZERO, cost_micros: 3, tokens_input: i },
            MONTH,
            'refuse',
            at(),
          ),
        ),
      );
      const usage = (await two.read.budgets.get('acme', budget.budget_id))!.usage;
      expect(usage.cost_micros).toBe(240);
      expect(usage.tokens_input).toBe((79 * 80) / 2);

      const reserved = await both(30, (s) =>
        s.withTransaction((t) => t.budgets.reserveExecution('acme', budget.budget_id, MONTH, at())),
      );
      expect(reserved.filter((r) => r?.reserved === true)).toHaveLength(25);
      expect((await one.read.budgets.get('acme', budget.budget_id))!.usage.executions).toBe(25);
    });

    it('lose no envelope cost, per model too, when both charge one envelope at once', async () => {
      const envelope = anEnvelope('acme');
      await one.withTransaction((t) => t.envelopes.insert('acme', envelope, { executionTaken: 'refuse' }));
      await both(20, (s, i) =>
        s.withTransaction((t) =>
          t.envelopes.charge(
            'acme',
            envelope.envelope_id,
            aCharge(i % 3 === 0 ? 'gpt-4o' : 'claude'),
            'saturate',
            at(),
          ),
        ),
      );
      const cost = (await two.read.envelopes.get('acme', envelope.envelope_id))!.cost;
      expect(cost).toMatchObject({ tokens_input: 400, tokens_output: 200, cost_micros: 4000, llm_calls: 40 });
      const byModel = Object.fromEntries(cost.model_costs.map((m) => [m.model_id, m.call_count]));
      expect(byModel).toEqual({ 'gpt-4o': 14, claude: 26 });
    });

    it('let one of two writers that read one execution-context version write it, and number concurrent saves apart', async () => {
      const context = (version: number, writer: string) => ({
        execution_id: 'exec-ctx',
        tenant_id: 'acme',
        values: { writer },
        version,
        updated_at: at(),
      });
      await one.withTransaction((t) => t.executionContexts.put('acme', context(1, 'first'), 0));
      // Both have read version 1 before either writes.
      let arrived = 0;
      let release: () => void = () => undefined;
      const bothRead = new Promise<void>((resolve) => (release = resolve));
      const write = (s: Storage, writer: string) =>
        s.withTransaction(async (t) => {
          const read = (await t.executionContexts.get('acme', 'exec-ctx'))!.version;
          if (++arrived === 2) release();
          await bothRead;
          return t.executionContexts.put('acme', context(read + 1, writer), read);
        });
      const outcomes = await Promise.all([write(one, 'one'), write(two, 'two')]);
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      const stored = await two.read.executionContexts.get('acme', 'exec-ctx');
      expect(stored).toMatchObject({ version: 2, values: { writer: outcomes[0] ? 'one' : 'two' } });

      const saved = await both(10, (s) =>
        s.withTransaction((t) =>
          t.checkpoints.insert('acme', aCheckpoint('acme', { execution_id: 'exec-ctx' }), 'next'),
        ),
      );
      expect(saved.map((c) => c.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    });

    it('keep one audit chain that verifies when both append at once', async () => {
      await both(30, (s, i) =>
        s.withTransaction(async (t) => {
          await t.audit.append('acme-audit', anAuditDraft(`a.${i}`));
          // Some transactions append twice: their records stay adjacent in the chain.
          if (i % 3 === 0) await t.audit.append('acme-audit', anAuditDraft(`b.${i}`));
        }),
      );
      const verification = await new AuditLog(one).verify('acme-audit');
      expect(verification).toEqual({ valid: true, checked: 80, first_invalid_seq: null, reason: null });
      expect(await two.read.audit.head('acme-audit')).toMatchObject({ seq: 80 });
    });

    it('deliver each outbox event once when both drain', async () => {
      const total = 300;
      for (let i = 0; i < total; i += 50)
        await one.withTransaction((t) =>
          t.outbox.append(
            Array.from({ length: 50 }, (_, j) => ({
              id: `m-${i + j}`,
              subject: 'svc.acme.events.x',
              data: { n: i + j },
            })),
          ),
        );
      const delivered: string[] = [];
      const drain = async (storage: Storage) => {
        for (;;) {
          const claim = await storage.outbox.claim(7);
          if (claim.entries.length === 0) return;
          delivered.push(...claim.entries.map((e) => e.event.id));
          await claim.settle(claim.entries.map((e) => e.key));
        }
      };
      await Promise.all([drain(one), drain(two), drain(one), drain(two)]);
      expect(delivered).toHaveLength(total);
      expect(new Set(delivered).size).toBe(total);
      expect(await two.outbox.depth()).toEqual({ entries: 0, bytes: 0 });
    });

    it('migrate a new database once when they start together', async () => {
      const fresh = await createTestDatabase();
      extra.push(fresh);
      const opened = await Promise.all(
        Array.from({ length: 3 }, () => PostgresStorage.open({ connectionString: fresh.url, poolSize: 2 })),
      );
      try {
        const versions = (await loadMigrations()).map((m) => m.version);
        expect(opened.map((o) => o.applied).sort((a, b) => b.length - a.length)).toEqual([versions, [], []]);
        for (const { storage } of opened) expect(await storage.schemaVersion()).toBe(Math.max(...versions));
      } finally {
        await Promise.all(opened.map((o) => o.storage.close()));
      }
    });

    it('index the envelopes a database held before their creation time had a column, U+0000 in a document too', async () => {
      const older = await createTestDatabase();
      extra.push(older);
      const before = (await loadMigrations()).filter((m) => m.version < 4);
      await (
        await PostgresStorage.open({ connectionString: older.url, poolSize: 1, migrations: before })
      ).storage.close();
      const made = [
        anEnvelope('acme', { created_at: at(-2000), metadata: { note: 'a\u0000b' } }),
        anEnvelope('acme', { created_at: at(-1000) }),
      ];
      const pool = new Pool({ connectionString: older.url });
      try {
        for (const e of made)
          await pool.query(
            `INSERT INTO envelopes (tenant_id, envelope_id, budget_id, status, status_reason, updated_at, completed_at,
               ended, tokens_input, tokens_output, cost_micros, llm_calls, tool_calls, doc)
             VALUES ($1, $2, NULL, $3, NULL, $4, NULL, false, 0, 0, 0, 0, 0, $5)`,
            ['acme', e.envelope_id, e.status, e.updated_at, JSON.stringify(e)],
          );
      } finally {
        await pool.end();
      }
      const { storage, applied } = await PostgresStorage.open({ connectionString: older.url, poolSize: 1 });
      try {
        expect(applied).toContain(4);
        const newest = await storage.read.envelopes.listNewest('acme', {});
        expect(newest.items.map((e) => e.envelope_id)).toEqual([made[1]!.envelope_id, made[0]!.envelope_id]);
        expect(newest.items[1]!.metadata).toEqual({ note: 'a\u0000b' });
      } finally {
        await storage.close();
      }
    });

    it('put the envelope times a database held before in the canonical form, listed in time order, odd documents too', async () => {
      const older = await createTestDatabase();
      extra.push(older);
      const before = (await loadMigrations()).filter((m) => m.version < 10);
      const written = [
        // By text, the first sorts after the second: 10:00 east of UTC is 00:00 UTC.
        anEnvelope('acme', { created_at: withOffset(at(0), 600), metadata: { note: 'a\u0000b' } }),
        anEnvelope('acme', { created_at: at(1000).replace('.000Z', 'Z'), updated_at: withOffset(at(1500), -90) }),
        anEnvelope('acme', {
          created_at: withOffset(at(2000), -300),
          completed_at: at(2500).replace('Z', '000Z'),
          metadata: { created_at: withOffset(at(2000), -300) },
        }),
        anEnvelope('acme', { created_at: at(3000) }),
        // PostgreSQL has no year 0: such a time stays as written.
        anEnvelope('acme', { created_at: '0000-01-01T00:00:00Z' }),
      ];
      const old = await PostgresStorage.open({ connectionString: older.url, poolSize: 1, migrations: before });
      await old.storage.withTransaction(async (t) => {
        for (const e of written) await t.envelopes.insert('acme', e, { executionTaken: 'refuse' });
      });
      await old.storage.close();
      const { storage, applied } = await PostgresStorage.open({ connectionString: older.url, poolSize: 1 });
      try {
        expect(applied).toEqual([10]);
        const ids = written.map((e) => e.envelope_id);
        const seen: Array<{ id: string; created: string }> = [];
        let pageToken: string | null = null;
        do {
          const page = await storage.read.envelopes.listNewest('acme', {}, { pageSize: 2, pageToken });
          seen.push(...page.items.map((e) => ({ id: e.envelope_id, created: e.created_at })));
          pageToken = page.nextPageToken;
        } while (pageToken !== null);
        expect(seen).toEqual([
          { id: ids[3], created: at(3000) },
          { id: ids[2], created: at(2000) },
          { id: ids[1], created: at(1000) },
          { id: ids[0], created: at(0) },
          { id: ids[4], created: '0000-01-01T00:00:00Z' },
        ]);
        expect(await storage.read.envelopes.get('acme', ids[0]!)).toMatchObject({ metadata: { note: 'a\u0000b' } });
        expect(await storage.read.envelopes.get('acme', ids[1]!)).toMatchObject({ updated_at: at(1500) });
        // The envelope's own time changes, not the same text in its metadata.
        expect(await storage.read.envelopes.get('acme', ids[2]!)).toMatchObject({
          completed_at: at(2500),
          metadata: { created_at: written[2]!.created_at },
        });
      } finally {
        await storage.close();
      }
    });

    it('run a transaction again when it loses a deadlock', async () => {
      const [a, b] = [aBudget('acme'), aBudget('acme')];
      await one.withTransaction(async (t) => {
        await t.budgets.insert('acme', a);
        await t.budgets.insert('acme', b);
      });
      // Each holds one budget and waits for the other's: PostgreSQL ends one of them, which runs again.
      let attempts = 0;
      const arrived: Array<() => void> = [];
      const barrier = () =>
        new Promise<void>((resolve) => {
          arrived.push(resolve);
          if (arrived.length === 2) for (const go of arrived) go();
        });
      const cross = (storage: Storage, first: string, second: string) =>
        storage.withTransaction(async (t) => {
          attempts++;
          await t.budgets.addUsage('acme', first, { ...ZERO, cost_micros: 1 }, MONTH, 'refuse', at());
          if (attempts <= 2) await barrier();
          await t.budgets.addUsage('acme', second, { ...ZERO, cost_micros: 1 }, MONTH, 'refuse', at());
        });
      await Promise.all([cross(one, a.budget_id, b.budget_id), cross(two, b.budget_id, a.budget_id)]);
      expect(attempts).toBe(3);
      for (const id of [a.budget_id, b.budget_id])
        expect((await one.read.budgets.get('acme', id))?.usage.cost_micros).toBe(2);
    });
  });

  it('refuses a text value holding U+0000, which PostgreSQL cannot store, as the caller’s error (SVC-SYS-9002)', async () => {
    await truncateAll(database.url);
    const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 2 });
    try {
      await expect(storage.read.envelopes.get('acme', 'a\u0000b')).rejects.toMatchObject({ code: 'SVC-SYS-9002' });
      const envelope = anEnvelope('acme', { execution_id: 'x\u0000y' });
      await expect(
        storage.withTransaction((t) => t.envelopes.insert('acme', envelope, { executionTaken: 'refuse' })),
      ).rejects.toMatchObject({ code: 'SVC-SYS-9002' });
      expect(await storage.read.envelopes.get('acme', envelope.envelope_id)).toBeUndefined();
      // Inside a JSON document the character is escaped and kept.
      const kept = anEnvelope('acme', { metadata: { note: 'a\u0000b' } });
      await storage.withTransaction((t) => t.envelopes.insert('acme', kept, { executionTaken: 'refuse' }));
      expect(await storage.read.envelopes.get('acme', kept.envelope_id)).toEqual(kept);
    } finally {
      await storage.close();
    }
  });

  it('sets aside at once a bus message whose values PostgreSQL refuses, and applies the next', async () => {
    const own = await createTestDatabase();
    const cp = await startControlPlane({ database_url: own.url });
    const pool = new Pool({ connectionString: own.url, max: 1 });
    try {
      // An index on a value no bound keeps small, as every indexed column once was: a row past the
      // index's limit fails its statement with SQLSTATE 54000.
      await pool.query("CREATE INDEX events_by_payload ON events ((doc ->> 'payload'))");
      const key = await tenantWithKey(cp, 'acme');
      const budget = await cp.call('POST', '/v1/budgets', {
        key,
        body: { name: 'b', type: 'hybrid', limits: { max_tokens: 1_000 }, period: 'total' },
      });
      const event = (input: number, payload: Record<string, unknown>) => ({
        event_id: randomUUID(),
        tenant_id: 'acme',
        envelope_id: randomUUID(),
        budget_id: budget.body.budget_id,
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        tokens: { input, output: 0 },
        cost_usd: 0,
        payload,
        source: 'proxy:pod-a',
      });
      const unindexable = event(1, { blob: randomBytes(12_000).toString('base64') });
      const good = event(7, {});
      for (const e of [unindexable, good])
        await cp.messaging.bus.publish(subjects.event('acme', 'llm.call'), e, { msgId: e.event_id });
      // Retried in place, it would hold every tenant's events behind it for seconds.
      await eventually(
        () => cp.plane.processor.stats,
        (stats) => stats.applied === 1 && stats.rejected === 1,
        1_000,
      );
      const usage = await cp.call('GET', `/v1/budgets/${budget.body.budget_id}/usage`, { key });
      expect(usage.body).toMatchObject({ tokens_input: 7, llm_calls: 1 });
    } finally {
      await pool.end();
      await cp.close();
      await own.drop();
    }
  });

  it('counts the outbox and answers health checks while every pooled connection is in a transaction', async () => {
    await truncateAll(database.url);
    const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 1 });
    try {
      // What outbox admission does inside a transaction: with the one connection held, a count on
      // the same pool would wait for ever.
      const seen = await storage.withTransaction(async (t) => {
        await t.outbox.append([{ id: 'm-1', subject: 'svc.acme.events.x', data: {} }]);
        return { depth: await storage.outbox.depth(), health: await storage.health() };
      });
      expect(seen).toEqual({ depth: { entries: 0, bytes: 0 }, health: { status: 'ok' } });
      expect((await storage.outbox.depth()).entries).toBe(1);
    } finally {
      await storage.close();
    }
  });

  it('reports itself down, without the URL, once the database is gone; and refuses a newer schema', async () => {
    const gone = await createTestDatabase();
    const { storage } = await PostgresStorage.open({ connectionString: gone.url, poolSize: 2 });
    try {
      await expect(
        PostgresStorage.open({
          connectionString: gone.url,
          poolSize: 1,
          migrations: [{ version: 0, name: 'older', sql: 'SELECT 1' }],
        }),
      ).rejects.toMatchObject({
        code: 'SVC-SYS-9001',
        message: expect.stringContaining('newer than this build knows'),
      });
      await gone.drop();
      const check = await storage.health();
      expect(check).toEqual({ status: 'down', detail: 'storage not reachable' });
      expect(JSON.stringify(check)).not.toContain(gone.name);
    } finally {
      await storage.close();
    }
  });
});
