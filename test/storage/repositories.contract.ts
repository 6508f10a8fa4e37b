import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_TOTAL, NO_LIMITS, usdToMicros, type AuditRecord } from '../../core/domain/index.ts';
import { LeaseRequestSchema, type LeaseRequest } from '../../core/sync/contract.ts';
import { LeaseLedger } from '../../control-plane/leases/lease-ledger.ts';
import { auditHash, GENESIS } from '../../control-plane/audit/chain.ts';
import { FILTER_SCAN_LIMIT } from '../../control-plane/storage/lmdb/pages.ts';
import { collectPages } from '../../control-plane/storage/paging.ts';
import type { ImmuneDetection } from '../../core/brain/index.ts';
import type { Checkpoint } from '../../control-plane/checkpoints/checkpoint.ts';
import type {
  CheckpointFilter,
  DetectionFilter,
  Page,
  PageRequest,
  Repositories,
  Storage,
} from '../../control-plane/storage/storage.ts';
import {
  aBudget,
  aCharge,
  aCheckpoint,
  aDetection,
  anApiKey,
  anApproval,
  anAuditDraft,
  anEnvelope,
  anEvent,
  aPolicy,
  at,
  NOW,
} from './records.ts';

/** Opens a fresh, empty storage; `dispose` closes it and removes what it made. */
export type StorageFactory = () => Promise<{ storage: Storage; dispose: () => Promise<void> }>;

const A = 'tenant-a';
const B = 'tenant-b';
const MONTH = { start: '2026-03-01T00:00:00.000Z', end: '2026-04-01T00:00:00.000Z' };
const NEXT_MONTH = { start: '2026-04-01T00:00:00.000Z', end: '2026-05-01T00:00:00.000Z' };
const DAY = 86_400_000;
const ZERO = { tokens_input: 0, tokens_output: 0, cost_micros: 0, executions: 0, llm_calls: 0, tool_calls: 0 };

/** Every page of a list, with the page sizes seen. */
async function walk<T>(list: (page: PageRequest) => Promise<Page<T>>, pageSize: number) {
  const items: T[] = [];
  const sizes: number[] = [];
  let pageToken: string | null = null;
  do {
    const page: Page<T> = await list({ pageSize, pageToken });
    items.push(...page.items);
    sizes.push(page.items.length);
    pageToken = page.nextPageToken;
  } while (pageToken !== null);
  return { items, sizes };
}

/** Walks a tenant's audit chain in order, checking every link and hash: how many records it holds. */
async function verifiedChainLength(storage: Storage, tenant: string): Promise<number> {
  const records = await collectPages((page) => storage.read.audit.list(tenant, { order: 'oldest' }, page));
  let prev = GENESIS;
  records.forEach((record: AuditRecord, i) => {
    const { hash, ...body } = record;
    expect(record.seq).toBe(i + 1);
    expect(record.prev_hash).toBe(prev);
    expect(auditHash(body)).toBe(hash);
    prev = hash;
  });
  expect(await storage.read.audit.head(tenant)).toEqual(
    records.length === 0 ? undefined : { seq: records.length, hash: prev },
  );
  return records.length;
}

/**
 * The behaviour every storage backend owes the control plane. Run by each backend's test file
 * with a factory that opens a fresh storage.
 */
export function storageContract(backend: string, factory: StorageFactory): void {
  describe(`storage contract: ${backend}`, () => {
    let storage: Storage;
    let dispose: () => Promise<void>;
    const tx = <T>(fn: (t: Repositories) => Promise<T>): Promise<T> => storage.withTransaction(fn);

    beforeEach(async () => {
      ({ storage, dispose } = await factory());
    });
    afterEach(async () => {
      await dispose();
    });

    describe('transactions', () => {
      it('commits every write of a transaction together, and reads inside see them', async () => {
        const budget = aBudget(A);
        const envelope = anEnvelope(A, { budget_id: budget.budget_id });
        const seen = await tx(async (t) => {
          await t.budgets.insert(A, budget);
          await t.envelopes.insert(A, envelope, { executionTaken: 'refuse' });
          await t.audit.append(A, anAuditDraft());
          return {
            budget: await t.budgets.get(A, budget.budget_id),
            live: (await t.envelopes.listLive(A, budget.budget_id)).items,
            outside: await storage.read.budgets.get(A, budget.budget_id),
          };
        });
        expect(seen.budget).toEqual(budget);
        expect(seen.live).toEqual([envelope]);
        expect(seen.outside).toBeUndefined();
        expect(await storage.read.budgets.get(A, budget.budget_id)).toEqual(budget);
        expect(await storage.read.envelopes.get(A, envelope.envelope_id)).toEqual(envelope);
      });

      it('leaves nothing behind when the transaction throws, whatever it wrote before', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        const envelope = anEnvelope(A, { budget_id: budget.budget_id });
        await expect(
          tx(async (t) => {
            await t.tenants.create({ tenant_id: 'half', name: 'half', created_at: at() });
            await t.envelopes.insert(A, envelope, { executionTaken: 'refuse' });
            await t.budgets.addUsage(A, budget.budget_id, { ...ZERO, cost_micros: 5 }, MONTH, 'refuse', at());
            await t.audit.append(A, anAuditDraft());
            await t.events.insertNew(A, [anEvent(A)]);
            await t.outbox.append([{ id: 'm-1', subject: 'svc.tenant-a.events.llm.call', data: {} }]);
            await t.policies.bumpVersion(A);
            throw new Error('half way');
          }),
        ).rejects.toThrow('half way');
        expect(await storage.read.tenants.get('half')).toBeUndefined();
        expect(await storage.read.tenants.exists('half')).toBe(false);
        expect(await storage.read.envelopes.get(A, envelope.envelope_id)).toBeUndefined();
        expect((await storage.read.budgets.get(A, budget.budget_id))?.usage.cost_micros).toBe(0);
        expect(await storage.read.audit.head(A)).toBeUndefined();
        expect((await storage.read.events.list(A, {})).items).toEqual([]);
        expect(await storage.read.policies.version(A)).toBe(0);
        expect((await storage.outbox.depth()).entries).toBe(0);
        // The execution id was not taken either.
        await tx((t) =>
          t.envelopes.insert(A, anEnvelope(A, { execution_id: envelope.execution_id }), {
            executionTaken: 'refuse',
          }),
        );
      });

      it('returns what the function returns, and refuses a nested transaction', async () => {
        expect(await tx(() => Promise.resolve(42))).toBe(42);
        await expect(tx(() => storage.withTransaction(() => Promise.resolve(1)))).rejects.toThrow(/nest/);
        expect(await tx(() => Promise.resolve('still usable'))).toBe('still usable');
      });

      it('loses no update when concurrent transactions change the same budget counter', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            tx(async (t) => {
              await t.budgets.addUsage(
                A,
                budget.budget_id,
                { ...ZERO, cost_micros: 1, tokens_input: i },
                MONTH,
                'refuse',
                at(),
              );
            }),
          ),
        );
        const usage = (await storage.read.budgets.get(A, budget.budget_id))!.usage;
        expect(usage.cost_micros).toBe(40);
        expect(usage.tokens_input).toBe((39 * 40) / 2);
      });

      it('reports its health and schema version', async () => {
        expect(await storage.health()).toEqual({ status: 'ok' });
        expect(await storage.schemaVersion()).toBeGreaterThanOrEqual(1);
      });
    });

    describe('paging', () => {
      it('walks a list in order, page by page, each item once', async () => {
        const budgets = Array.from({ length: 45 }, () => aBudget(A));
        await tx(async (t) => {
          for (const b of budgets) await t.budgets.insert(A, b);
        });
        const ids = budgets.map((b) => b.budget_id).sort();
        const { items, sizes } = await walk((page) => storage.read.budgets.list(A, page), 20);
        expect(items.map((b) => b.budget_id)).toEqual(ids);
        expect(sizes).toEqual([20, 20, 5]);
        const first = await storage.read.budgets.list(A);
        expect(first.items).toHaveLength(20);
        expect(first.nextPageToken).toMatch(/^[A-Za-z0-9_-]+$/);
        const whole = await storage.read.budgets.list(A, { pageSize: 100 });
        expect(whole.items).toHaveLength(45);
        expect(whole.nextPageToken).toBeNull();
      });

      it('ends with a null token when the last page is exactly full', async () => {
        await tx(async (t) => {
          for (let i = 0; i < 4; i++) await t.policies.insert(A, aPolicy(A));
        });
        const { sizes } = await walk((page) => storage.read.policies.list(A, page), 2);
        expect(sizes).toEqual([2, 2]);
      });

      it('refuses a page size out of range and a token it did not issue (SVC-SYS-9002, naming the field)', async () => {
        for (const pageSize of [0, 101, 2.5]) {
          await expect(storage.read.budgets.list(A, { pageSize })).rejects.toMatchObject({
            code: 'SVC-SYS-9002',
            fieldViolations: [{ field: 'page_size' }],
          });
        }
        const oversized = 'A'.repeat(100_000);
        for (const pageToken of ['not a token', 'e30', Buffer.from('[1,2,3]').toString('base64url'), oversized]) {
          await expect(storage.read.budgets.list(A, { pageToken })).rejects.toMatchObject({
            code: 'SVC-SYS-9002',
            fieldViolations: [{ field: 'page_token' }],
          });
        }
      });

      it('never continues into another tenant with a token of its own', async () => {
        const mine = aBudget(A);
        await tx(async (t) => {
          await t.budgets.insert(A, mine);
          await t.budgets.insert(A, aBudget(A));
          for (let i = 0; i < 3; i++) await t.budgets.insert(B, aBudget(B));
        });
        const page = await storage.read.budgets.list(A, { pageSize: 1 });
        const rest = await storage.read.budgets.list(A, { pageSize: 100, pageToken: page.nextPageToken });
        expect([...page.items, ...rest.items].every((b) => b.tenant_id === A)).toBe(true);
        expect(page.items.length + rest.items.length).toBe(2);
      });
    });

    describe('tenants and webhook secrets', () => {
      it('creates, reads and lists tenants; a taken id is SVC-SYS-9008 naming tenant_id', async () => {
        const tenant = { tenant_id: 'acme', name: 'Acme', created_at: at() };
        await tx((t) => t.tenants.create(tenant));
        expect(await storage.read.tenants.get('acme')).toEqual(tenant);
        expect(await storage.read.tenants.get('other')).toBeUndefined();
        await expect(tx((t) => t.tenants.create({ ...tenant, name: 'again' }))).rejects.toMatchObject({
          code: 'SVC-SYS-9008',
          fieldViolations: [{ field: 'tenant_id' }],
        });
        expect((await storage.read.tenants.get('acme'))?.name).toBe('Acme');
        await tx((t) => t.tenants.create({ tenant_id: 'zeta', name: 'Z', created_at: at() }));
        const { items } = await walk((page) => storage.read.tenants.list(page), 1);
        expect(items.map((t) => t.tenant_id)).toEqual(['acme', 'zeta']);
      });

      it('tells whether a tenant exists, a transaction seeing the one it created before it commits', async () => {
        await tx((t) => t.tenants.create({ tenant_id: 'acme', name: 'Acme', created_at: at() }));
        expect(await storage.read.tenants.exists('acme')).toBe(true);
        expect(await storage.read.tenants.exists('other')).toBe(false);
        const seen = await tx(async (t) => {
          const before = await t.tenants.exists('beta');
          await t.tenants.create({ tenant_id: 'beta', name: 'Beta', created_at: at() });
          return { before, after: await t.tenants.exists('beta'), outside: await storage.read.tenants.exists('beta') };
        });
        expect(seen).toEqual({ before: false, after: true, outside: false });
        expect(await storage.read.tenants.exists('beta')).toBe(true);
      });

      it('issues a first webhook secret once, and replaces it on rotation', async () => {
        const first = { current: 'whsec_1', previous: null, previous_until: null, rotated_at: at() };
        expect(await tx((t) => t.tenants.issueWebhookSecret(A, first))).toEqual(first);
        const second = { ...first, current: 'whsec_2' };
        expect(await tx((t) => t.tenants.issueWebhookSecret(A, second))).toEqual(first);
        const rotated = { current: 'whsec_3', previous: 'whsec_1', previous_until: at(60_000), rotated_at: at() };
        await tx((t) => t.tenants.putWebhookSecret(A, rotated));
        expect(await storage.read.tenants.webhookSecret(A)).toEqual(rotated);
        expect(await storage.read.tenants.webhookSecret(B)).toBeUndefined();
      });
    });

    describe('envelopes', () => {
      it('lists newest first by creation time then id, by status when asked, a page at a time, per tenant', async () => {
        const made = [
          anEnvelope(A, { envelope_id: 'e-old', created_at: at(-3000), status: 'RUNNING' }),
          anEnvelope(A, { envelope_id: 'e-mid-a', created_at: at(-2000), status: 'COMPLETED' }),
          anEnvelope(A, { envelope_id: 'e-mid-b', created_at: at(-2000) }),
          anEnvelope(A, { envelope_id: 'e-new', created_at: at(-1000), status: 'TERMINATED' }),
          anEnvelope(B, { envelope_id: 'e-other', created_at: at() }),
        ];
        await tx(async (t) => {
          for (const e of made) await t.envelopes.insert(e.tenant_id, e, { executionTaken: 'keep' });
        });
        const { items, sizes } = await walk((page) => storage.read.envelopes.listNewest(A, {}, page), 3);
        expect(items.map((e) => e.envelope_id)).toEqual(['e-new', 'e-mid-b', 'e-mid-a', 'e-old']);
        expect(sizes).toEqual([3, 1]);
        const ended = await storage.read.envelopes.listNewest(A, { statuses: ['COMPLETED', 'TERMINATED'] });
        expect(ended.items.map((e) => e.envelope_id)).toEqual(['e-new', 'e-mid-a']);
        // A status change leaves the order as it was: creation does not change.
        await tx((t) =>
          t.envelopes.transition(A, 'e-old', 'RUNNING', {
            status: 'COMPLETED',
            status_reason: null,
            updated_at: at(),
            completed_at: at(),
          }),
        );
        expect((await storage.read.envelopes.listNewest(A, {})).items.at(-1)).toMatchObject({
          envelope_id: 'e-old',
          status: 'COMPLETED',
        });
        expect((await storage.read.envelopes.listNewest(B, {})).items.map((e) => e.envelope_id)).toEqual(['e-other']);
      });

      it('walks a filter that matches little across more envelopes than one page reads, each match once', async () => {
        const budget = aBudget(A);
        const made = Array.from({ length: FILTER_SCAN_LIMIT * 2 + 10 }, (_, i) =>
          anEnvelope(A, {
            envelope_id: `e-${String(i).padStart(5, '0')}`,
            created_at: at(i),
            ...(i % 600 === 0 ? { status: 'PAUSED' as const, budget_id: budget.budget_id } : {}),
          }),
        );
        await tx(async (t) => {
          await t.budgets.insert(A, budget);
          await t.envelopes.insertMany(A, made);
        });
        const rare = made.filter((e) => e.status === 'PAUSED').map((e) => e.envelope_id);
        const cases = [
          (page: PageRequest) => storage.read.envelopes.list(A, { status: 'PAUSED' }, page),
          (page: PageRequest) => storage.read.envelopes.list(A, { budgetId: budget.budget_id }, page),
        ];
        for (const list of cases) {
          const { items, sizes } = await walk(list, 2);
          expect(items.map((e) => e.envelope_id)).toEqual(rare);
          expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
        }
        const newest = await walk((page) => storage.read.envelopes.listNewest(A, { statuses: ['PAUSED'] }, page), 2);
        expect(newest.items.map((e) => e.envelope_id)).toEqual([...rare].reverse());
        const none = await walk((page) => storage.read.envelopes.listNewest(A, { statuses: ['FAILED'] }, page), 2);
        expect(none.items).toEqual([]);
      });

      it('lists ids of every character, those starting outside the Basic Multilingual Plane included', async () => {
        const budget = aBudget(A);
        const ids = ['a', '\uffff', '😀', '𝔘x', '\u{10fffd}'];
        await tx(async (t) => {
          await t.budgets.insert(A, budget);
          for (const id of ids)
            await t.envelopes.insert(
              A,
              anEnvelope(A, { envelope_id: id, execution_id: `x-${id}`, budget_id: budget.budget_id }),
              { executionTaken: 'refuse' },
            );
        });
        const all = await collectPages((page) => storage.read.envelopes.list(A, {}, page));
        expect(all.map((e) => e.envelope_id).sort()).toEqual([...ids].sort());
        const live = await collectPages((page) => storage.read.envelopes.listLive(A, budget.budget_id, page));
        expect(live.map((e) => e.envelope_id).sort()).toEqual([...ids].sort());
      });

      it('reads many envelopes at once: those that exist, of the tenant named, each once', async () => {
        const [first, second] = [anEnvelope(A), anEnvelope(A)];
        const other = anEnvelope(B);
        await tx(async (t) => {
          await t.envelopes.insert(A, first, { executionTaken: 'refuse' });
          await t.envelopes.insert(A, second, { executionTaken: 'refuse' });
          await t.envelopes.insert(B, other, { executionTaken: 'refuse' });
        });
        const ids = [second.envelope_id, 'missing', first.envelope_id, other.envelope_id, second.envelope_id];
        const read = await storage.read.envelopes.getMany(A, ids);
        expect(read.sort((a, b) => a.envelope_id.localeCompare(b.envelope_id))).toEqual(
          [first, second].sort((a, b) => a.envelope_id.localeCompare(b.envelope_id)),
        );
        expect(await tx((t) => t.envelopes.getMany(A, ids))).toHaveLength(2);
        expect(await storage.read.envelopes.getMany(A, [])).toEqual([]);
      });

      it('holds the budgets and envelopes read for update until the transaction ends', async () => {
        const budget = aBudget(A);
        const envelope = { ...anEnvelope(A), budget_id: budget.budget_id };
        const other = anEnvelope(B);
        await tx(async (t) => {
          await t.budgets.insert(A, budget);
          await t.envelopes.insert(A, envelope, { executionTaken: 'refuse' });
          await t.envelopes.insert(B, other, { executionTaken: 'refuse' });
        });
        const order: string[] = [];
        const held = Promise.withResolvers<void>();
        const release = Promise.withResolvers<void>();
        const first = tx(async (t) => {
          const budgets = await t.budgets.getManyForUpdate(A, [budget.budget_id, 'missing', budget.budget_id]);
          const envelopes = await t.envelopes.getManyForUpdate(A, [
            envelope.envelope_id,
            other.envelope_id,
            envelope.envelope_id,
          ]);
          expect(budgets).toEqual([budget]);
          expect(envelopes).toEqual([envelope]);
          held.resolve();
          await release.promise;
          order.push('first');
        });
        await held.promise;
        const second = tx(async (t) => {
          await t.envelopes.charge(A, envelope.envelope_id, aCharge('gpt-4o'), 'refuse', at(1));
          await t.budgets.addUsage(
            A,
            budget.budget_id,
            { tokens_input: 1, tokens_output: 0, cost_micros: 0, executions: 0, llm_calls: 1, tool_calls: 0 },
            MONTH,
            'refuse',
            at(1),
          );
          order.push('second');
        });
        // The second writer waits for the rows the first holds.
        await new Promise((r) => setTimeout(r, 300));
        expect(order).toEqual([]);
        release.resolve();
        await Promise.all([first, second]);
        expect(order).toEqual(['first', 'second']);
        expect(await tx((t) => t.envelopes.getManyForUpdate(A, []))).toEqual([]);
        expect(await tx((t) => t.budgets.getManyForUpdate(A, []))).toEqual([]);
      });

      it('stores, reads and keeps tenants apart', async () => {
        const envelope = anEnvelope(A);
        expect(await tx((t) => t.envelopes.insert(A, envelope, { executionTaken: 'refuse' }))).toBe(true);
        expect(await storage.read.envelopes.get(A, envelope.envelope_id)).toEqual(envelope);
        expect(await storage.read.envelopes.get(B, envelope.envelope_id)).toBeUndefined();
        expect((await storage.read.envelopes.list(B, {})).items).toEqual([]);
        expect(
          await tx((t) => t.envelopes.insert(A, { ...envelope, adapter_type: 'x' }, { executionTaken: 'keep' })),
        ).toBe(false);
        expect((await storage.read.envelopes.get(A, envelope.envelope_id))?.adapter_type).toBe('custom');
      });

      it('inserts many as one keeping insert each would: an id that exists left out, execution ids kept by their first', async () => {
        const budget = aBudget(A);
        const existing = anEnvelope(A, { execution_id: 'exec-many-1' });
        await tx((t) => t.envelopes.insert(A, existing, { executionTaken: 'refuse' }));
        const charged = anEnvelope(A, { status: 'RUNNING', cost: aCharge('gpt-4o', { input: 7, output: 3 }, 42) });
        const sharing = anEnvelope(A, { execution_id: 'exec-many-1' });
        const twin = anEnvelope(A, { execution_id: 'exec-many-2' });
        const twinsTwin = anEnvelope(A, { execution_id: 'exec-many-2' });
        const ended = anEnvelope(A, { budget_id: budget.budget_id, status: 'COMPLETED', completed_at: at(1) });
        const live = anEnvelope(A, { budget_id: budget.budget_id });
        const stored = [charged, sharing, twin, twinsTwin, ended, live];
        const ids = await tx((t) =>
          t.envelopes.insertMany(A, [
            charged,
            { ...existing, adapter_type: 'again' },
            sharing,
            twin,
            twinsTwin,
            { ...twin, adapter_type: 'again' },
            ended,
            live,
          ]),
        );
        expect(ids).toEqual(stored.map((e) => e.envelope_id));
        for (const e of [...stored, existing]) expect(await storage.read.envelopes.get(A, e.envelope_id)).toEqual(e);
        expect(await storage.read.envelopes.get(B, charged.envelope_id)).toBeUndefined();
        // The execution ids are taken: by the envelope before the list, and by the first of the twins.
        for (const execution of ['exec-many-1', 'exec-many-2']) {
          const another = anEnvelope(A, { execution_id: execution });
          await expect(
            tx((t) => t.envelopes.insert(A, another, { executionTaken: 'refuse' })),
            execution,
          ).rejects.toMatchObject({ code: 'SVC-SYS-9008' });
        }
        const onBudget = await collectPages((page) => storage.read.envelopes.listLive(A, budget.budget_id, page));
        expect(onBudget.map((e) => e.envelope_id)).toEqual([live.envelope_id]);
        // Stored as inserted: its per-model costs take a charge as one inserted alone would.
        await tx((t) => t.envelopes.charge(A, charged.envelope_id, aCharge('gpt-4o'), 'refuse', at(2)));
        expect((await storage.read.envelopes.get(A, charged.envelope_id))?.cost.model_costs).toEqual([
          { model_id: 'gpt-4o', input_tokens: 17, output_tokens: 8, cost_micros: 142, call_count: 2 },
        ]);
        expect(await tx((t) => t.envelopes.insertMany(A, []))).toEqual([]);
      });

      it('keeps execution ids unique per tenant: refused (SVC-SYS-9008) or kept with the first', async () => {
        const first = anEnvelope(A, { execution_id: 'exec-1' });
        await tx((t) => t.envelopes.insert(A, first, { executionTaken: 'refuse' }));
        const second = anEnvelope(A, { execution_id: 'exec-1' });
        await expect(tx((t) => t.envelopes.insert(A, second, { executionTaken: 'refuse' }))).rejects.toMatchObject({
          code: 'SVC-SYS-9008',
          fieldViolations: [{ field: 'execution_id' }],
        });
        expect(await storage.read.envelopes.get(A, second.envelope_id)).toBeUndefined();
        expect(await tx((t) => t.envelopes.insert(A, second, { executionTaken: 'keep' }))).toBe(true);
        expect(await storage.read.envelopes.get(A, second.envelope_id)).toEqual(second);
        // The execution id still belongs to the first: a third is refused as before.
        await expect(
          tx((t) => t.envelopes.insert(A, anEnvelope(A, { execution_id: 'exec-1' }), { executionTaken: 'refuse' })),
        ).rejects.toMatchObject({ code: 'SVC-SYS-9008' });
        // Another tenant has its own execution ids.
        await tx((t) => t.envelopes.insert(B, anEnvelope(B, { execution_id: 'exec-1' }), { executionTaken: 'refuse' }));
      });

      it("keeps each budget's live envelopes apart, whatever its id holds", async () => {
        const budgets = ['B', 'B/x', 'B/x/y'];
        const envelopes = budgets.map((budgetId) =>
          anEnvelope(A, { envelope_id: `x/${budgetId}`, budget_id: budgetId }),
        );
        await tx(async (t) => {
          for (const e of envelopes) await t.envelopes.insert(A, e, { executionTaken: 'refuse' });
        });
        for (const [i, budgetId] of budgets.entries())
          expect((await storage.read.envelopes.listLive(A, budgetId)).items).toEqual([envelopes[i]]);
        const ended = { status: 'COMPLETED' as const, status_reason: null, updated_at: at(5), completed_at: at(5) };
        await tx((t) => t.envelopes.changeStatus(A, 'x/B/x', 'AUTHORIZED', ended));
        expect((await storage.read.envelopes.listLive(A, 'B/x')).items).toEqual([]);
        expect((await storage.read.envelopes.listLive(A, 'B')).items).toEqual([envelopes[0]]);
      });

      it('lists by status and budget, in id order, with filtered pages full', async () => {
        const budget = aBudget(A);
        const envelopes = Array.from({ length: 30 }, (_, i) =>
          anEnvelope(A, {
            status: i % 3 === 0 ? 'RUNNING' : 'AUTHORIZED',
            budget_id: i % 2 === 0 ? budget.budget_id : null,
          }),
        );
        await tx(async (t) => {
          for (const e of envelopes) await t.envelopes.insert(A, e, { executionTaken: 'refuse' });
        });
        const running = await walk((page) => storage.read.envelopes.list(A, { status: 'RUNNING' }, page), 3);
        const expected = envelopes
          .filter((e) => e.status === 'RUNNING')
          .map((e) => e.envelope_id)
          .sort();
        expect(running.items.map((e) => e.envelope_id)).toEqual(expected);
        expect(running.sizes.slice(0, -1).every((n) => n === 3)).toBe(true);
        const both = await collectPages((page) =>
          storage.read.envelopes.list(A, { status: 'RUNNING', budgetId: budget.budget_id }, page),
        );
        expect(both.map((e) => e.envelope_id)).toEqual(
          envelopes
            .filter((e) => e.status === 'RUNNING' && e.budget_id === budget.budget_id)
            .map((e) => e.envelope_id)
            .sort(),
        );
      });

      it('adds cost deltas, per model too, and bounds them as asked', async () => {
        const envelope = anEnvelope(A);
        await tx((t) => t.envelopes.insert(A, envelope, { executionTaken: 'refuse' }));
        await tx((t) => t.envelopes.charge(A, envelope.envelope_id, aCharge('gpt-4o'), 'refuse', at(1)));
        await tx((t) => t.envelopes.charge(A, envelope.envelope_id, aCharge('gpt-4o'), 'refuse', at(2)));
        const charged = await tx((t) =>
          t.envelopes.charge(A, envelope.envelope_id, aCharge('claude', { input: 1, output: 2 }, 7), 'refuse', at(3)),
        );
        expect(charged?.cost).toEqual({
          tokens_input: 21,
          tokens_output: 12,
          cost_micros: 207,
          llm_calls: 3,
          tool_calls: 0,
          model_costs: [
            { model_id: 'gpt-4o', input_tokens: 20, output_tokens: 10, cost_micros: 200, call_count: 2 },
            { model_id: 'claude', input_tokens: 1, output_tokens: 2, cost_micros: 7, call_count: 1 },
          ],
        });
        expect(charged?.updated_at).toBe(at(3));
        expect(await storage.read.envelopes.get(A, envelope.envelope_id)).toEqual(charged);
        expect(
          await tx((t) => t.envelopes.charge(B, envelope.envelope_id, aCharge(null), 'refuse', at())),
        ).toBeUndefined();

        const huge = { ...aCharge(null), cost_micros: MAX_TOTAL };
        await expect(
          tx((t) => t.envelopes.charge(A, envelope.envelope_id, huge, 'refuse', at())),
        ).rejects.toMatchObject({ code: 'SVC-EVT-4002', fieldViolations: [{ field: 'envelope cost_micros' }] });
        expect((await storage.read.envelopes.get(A, envelope.envelope_id))?.cost.cost_micros).toBe(207);
        const saturated = await tx((t) => t.envelopes.charge(A, envelope.envelope_id, huge, 'saturate', at()));
        expect(saturated?.cost.cost_micros).toBe(MAX_TOTAL);
      });

      it('charges many envelopes in one call exactly as one saturating charge each would', async () => {
        // Twins: each charged one way, the other the other, from the same start.
        const starts = [aCharge('gpt-4o'), aCharge(null), { ...aCharge('claude'), cost_micros: MAX_TOTAL - 5 }];
        const many = starts.map(() => anEnvelope(A));
        const one = starts.map(() => anEnvelope(A));
        await tx(async (t) => {
          for (const [i, start] of starts.entries())
            for (const e of [many[i]!, one[i]!]) {
              await t.envelopes.insert(A, e, { executionTaken: 'refuse' });
              await t.envelopes.charge(A, e.envelope_id, start, 'refuse', at(1));
            }
        });
        const twoModels = aCharge('gpt-4o');
        twoModels.model_costs.push(
          { model_id: 'mistral', input_tokens: 1, output_tokens: 1, cost_micros: 1, call_count: 1 },
          { model_id: 'gpt-4o', input_tokens: 3, output_tokens: 0, cost_micros: 2, call_count: 1 },
        );
        const deltas = [twoModels, aCharge('claude', { input: 2, output: 3 }, 9), aCharge('claude', undefined, 50)];
        await tx(async (t) => {
          await t.envelopes.chargeMany(A, [
            ...deltas.map((delta, i) => ({ envelopeId: many[i]!.envelope_id, delta, updatedAt: at(2 + i) })),
            { envelopeId: 'no-such-envelope', delta: aCharge('gpt-4o'), updatedAt: at(9) },
          ]);
          for (const [i, delta] of deltas.entries())
            await t.envelopes.charge(A, one[i]!.envelope_id, delta, 'saturate', at(2 + i));
        });
        for (const i of starts.keys()) {
          const got = await storage.read.envelopes.get(A, many[i]!.envelope_id);
          const want = await storage.read.envelopes.get(A, one[i]!.envelope_id);
          expect({ cost: got?.cost, updated_at: got?.updated_at }).toEqual({
            cost: want?.cost,
            updated_at: want?.updated_at,
          });
        }
        expect((await storage.read.envelopes.get(A, many[0]!.envelope_id))?.cost.model_costs).toEqual([
          { model_id: 'gpt-4o', input_tokens: 23, output_tokens: 10, cost_micros: 202, call_count: 3 },
          { model_id: 'mistral', input_tokens: 1, output_tokens: 1, cost_micros: 1, call_count: 1 },
        ]);
        expect((await storage.read.envelopes.get(A, many[2]!.envelope_id))?.cost.cost_micros).toBe(MAX_TOTAL);
        expect(await storage.read.envelopes.get(A, 'no-such-envelope')).toBeUndefined();
        // Another tenant's envelope of the same id is not charged.
        await tx((t) =>
          t.envelopes.chargeMany(B, [{ envelopeId: many[1]!.envelope_id, delta: aCharge('x'), updatedAt: at(9) }]),
        );
        expect((await storage.read.envelopes.get(A, many[1]!.envelope_id))?.updated_at).toBe(at(3));
        await tx((t) => t.envelopes.chargeMany(A, []));
      });

      it('changes status without reading the envelope back, from the status the caller saw only', async () => {
        const envelope = anEnvelope(A);
        await tx((t) => t.envelopes.insert(A, envelope, { executionTaken: 'refuse' }));
        const change = { status: 'RUNNING' as const, status_reason: 'go', updated_at: at(5), completed_at: null };
        expect(await tx((t) => t.envelopes.changeStatus(A, envelope.envelope_id, 'AUTHORIZED', change))).toBe(true);
        expect(await tx((t) => t.envelopes.changeStatus(A, envelope.envelope_id, 'AUTHORIZED', change))).toBe(false);
        expect(await tx((t) => t.envelopes.changeStatus(B, envelope.envelope_id, 'RUNNING', change))).toBe(false);
        expect(await storage.read.envelopes.get(A, envelope.envelope_id)).toEqual({ ...envelope, ...change });
      });

      it('moves status only from the status the caller saw (compare and set), and drops ended ones from the live list', async () => {
        const budget = aBudget(A);
        const one = anEnvelope(A, { budget_id: budget.budget_id });
        const two = anEnvelope(A, { budget_id: budget.budget_id });
        const ended = anEnvelope(A, { budget_id: budget.budget_id, status: 'COMPLETED' });
        const elsewhere = anEnvelope(A, { budget_id: aBudget(A).budget_id });
        await tx(async (t) => {
          for (const e of [one, two, ended, elsewhere]) await t.envelopes.insert(A, e, { executionTaken: 'refuse' });
        });
        const live = await collectPages((page) => storage.read.envelopes.listLive(A, budget.budget_id, page));
        expect(live.map((e) => e.envelope_id).sort()).toEqual([one.envelope_id, two.envelope_id].sort());

        const change = { status: 'RUNNING' as const, status_reason: 'go', updated_at: at(5), completed_at: null };
        const running = await tx((t) => t.envelopes.transition(A, one.envelope_id, 'AUTHORIZED', change));
        expect(running).toMatchObject({ status: 'RUNNING', status_reason: 'go', updated_at: at(5) });
        expect(await tx((t) => t.envelopes.transition(A, one.envelope_id, 'AUTHORIZED', change))).toBeUndefined();
        expect(await tx((t) => t.envelopes.transition(B, one.envelope_id, 'RUNNING', change))).toBeUndefined();

        const stop = {
          status: 'BUDGET_EXCEEDED' as const,
          status_reason: 'spent',
          updated_at: at(6),
          completed_at: at(6),
        };
        await tx((t) => t.envelopes.transition(A, one.envelope_id, 'RUNNING', stop));
        const after = await collectPages((page) => storage.read.envelopes.listLive(A, budget.budget_id, page));
        expect(after.map((e) => e.envelope_id)).toEqual([two.envelope_id]);
        expect((await storage.read.envelopes.listLive(B, budget.budget_id)).items).toEqual([]);
      });
    });

    describe('budgets and their counters', () => {
      it('stores and reads budgets; a taken id is SVC-SYS-9008 naming budget_id', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        expect(await storage.read.budgets.get(A, budget.budget_id)).toEqual(budget);
        expect(await storage.read.budgets.get(B, budget.budget_id)).toBeUndefined();
        expect(await tx((t) => t.budgets.getForUpdate(A, budget.budget_id))).toEqual(budget);
        await expect(tx((t) => t.budgets.insert(A, budget))).rejects.toMatchObject({
          code: 'SVC-SYS-9008',
          fieldViolations: [{ field: 'budget_id' }],
        });
      });

      it('redefines a budget in its tenant only, keeping the usage other writers added', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        const delta = {
          tokens_input: 7,
          tokens_output: 3,
          cost_micros: 40,
          executions: 1,
          llm_calls: 1,
          tool_calls: 0,
        };
        await tx((t) => t.budgets.addUsage(A, budget.budget_id, delta, MONTH, 'refuse', at(1)));
        const definition = {
          name: 'renamed',
          description: 'now hybrid',
          type: 'hybrid' as const,
          limits: { ...budget.limits, max_tokens: 5000, max_cost_usd: 12.5 },
          alerts: [{ percent: 60, action: 'warn' as const }],
          expires_at: null,
          workflow_id: 'etl',
          tags: { team: 'data' },
        };
        expect(await tx((t) => t.budgets.redefine(B, budget.budget_id, definition, at(2)))).toBeUndefined();
        const after = await tx((t) => t.budgets.redefine(A, budget.budget_id, definition, at(2)));
        expect(after).toMatchObject({ ...definition, budget_id: budget.budget_id, updated_at: at(2) });
        expect(after?.usage).toMatchObject({ tokens_input: 7, tokens_output: 3, cost_micros: 40, executions: 1 });
        expect(await storage.read.budgets.get(A, budget.budget_id)).toEqual(after);
        const charged = await tx((t) => t.budgets.addUsage(A, budget.budget_id, delta, MONTH, 'refuse', at(3)));
        expect(charged).toMatchObject({ name: 'renamed', limits: { max_tokens: 5000 }, usage: { tokens_input: 14 } });
      });

      it('adds usage deltas, bounded as asked, and returns the budget after', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        const delta = {
          tokens_input: 10,
          tokens_output: 5,
          cost_micros: 300,
          executions: 0,
          llm_calls: 1,
          tool_calls: 2,
        };
        await tx((t) => t.budgets.addUsage(A, budget.budget_id, delta, MONTH, 'refuse', at(1)));
        const after = await tx((t) => t.budgets.addUsage(A, budget.budget_id, delta, MONTH, 'refuse', at(2)));
        expect(after?.usage).toMatchObject({
          period_start: MONTH.start,
          tokens_input: 20,
          tokens_output: 10,
          cost_micros: 600,
          llm_calls: 2,
          tool_calls: 4,
        });
        expect(after?.updated_at).toBe(at(2));
        expect(await storage.read.budgets.get(A, budget.budget_id)).toEqual(after);
        expect(await tx((t) => t.budgets.addUsage(B, budget.budget_id, delta, MONTH, 'refuse', at()))).toBeUndefined();
        await expect(
          tx((t) =>
            t.budgets.addUsage(A, budget.budget_id, { ...ZERO, cost_micros: MAX_TOTAL }, MONTH, 'refuse', at()),
          ),
        ).rejects.toMatchObject({ code: 'SVC-EVT-4002' });
        expect((await storage.read.budgets.get(A, budget.budget_id))?.usage.cost_micros).toBe(600);
        const saturated = await tx((t) =>
          t.budgets.addUsage(A, budget.budget_id, { ...ZERO, cost_micros: MAX_TOTAL }, MONTH, 'saturate', at()),
        );
        expect(saturated?.usage.cost_micros).toBe(MAX_TOTAL);
      });

      it('rolls the counters over into a later period, fired alerts included, and never back', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        await tx((t) => t.budgets.addUsage(A, budget.budget_id, { ...ZERO, cost_micros: 50 }, MONTH, 'refuse', at()));
        expect(await tx((t) => t.budgets.markAlertsFired(A, budget.budget_id, MONTH.start, [80]))).toEqual([80]);
        const rolled = await tx((t) =>
          t.budgets.addUsage(A, budget.budget_id, { ...ZERO, cost_micros: 7 }, NEXT_MONTH, 'refuse', at()),
        );
        expect(rolled?.usage).toEqual({
          period_start: NEXT_MONTH.start,
          period_end: NEXT_MONTH.end,
          tokens_input: 0,
          tokens_output: 0,
          cost_micros: 7,
          executions: 0,
          llm_calls: 0,
          tool_calls: 0,
          alerts_fired: [],
        });
        // A late event of the month before counts in the period the budget is in now.
        const late = await tx((t) =>
          t.budgets.addUsage(A, budget.budget_id, { ...ZERO, cost_micros: 3 }, MONTH, 'refuse', at()),
        );
        expect(late?.usage).toMatchObject({ period_start: NEXT_MONTH.start, cost_micros: 10 });
      });

      it('reserves executions up to max_executions, and no further', async () => {
        const budget = aBudget(A, { limits: { ...aBudget(A).limits, max_executions: 3 } });
        await tx((t) => t.budgets.insert(A, budget));
        const results = await Promise.all(
          Array.from({ length: 5 }, () => tx((t) => t.budgets.reserveExecution(A, budget.budget_id, MONTH, at()))),
        );
        // Which of the concurrent transactions win is the backend's (LMDB: the first three).
        expect(results.filter((r) => r?.reserved === true)).toHaveLength(3);
        expect(results.filter((r) => r?.reserved === false).map((r) => r?.budget.usage.executions)).toEqual([3, 3]);
        expect((await storage.read.budgets.get(A, budget.budget_id))?.usage.executions).toBe(3);
        // A new period has room again.
        const next = await tx((t) => t.budgets.reserveExecution(A, budget.budget_id, NEXT_MONTH, at()));
        expect(next).toMatchObject({
          reserved: true,
          budget: { usage: { period_start: NEXT_MONTH.start, executions: 1 } },
        });
        expect(await tx((t) => t.budgets.reserveExecution(B, budget.budget_id, MONTH, at()))).toBeUndefined();
        const unlimited = aBudget(A);
        await tx((t) => t.budgets.insert(A, unlimited));
        for (let i = 0; i < 3; i++) await tx((t) => t.budgets.reserveExecution(A, unlimited.budget_id, MONTH, at()));
        expect((await storage.read.budgets.get(A, unlimited.budget_id))?.usage.executions).toBe(3);
      });

      it('marks each alert fired once per period: only the first marker learns it is new', async () => {
        const budget = aBudget(A);
        await tx((t) => t.budgets.insert(A, budget));
        const start = budget.usage.period_start;
        const outcomes = await Promise.all(
          Array.from({ length: 5 }, () => tx((t) => t.budgets.markAlertsFired(A, budget.budget_id, start, [80, 100]))),
        );
        expect(outcomes.filter((o) => o.length > 0)).toEqual([[80, 100]]);
        expect(await tx((t) => t.budgets.markAlertsFired(A, budget.budget_id, start, [50, 80]))).toEqual([50]);
        const fired = (await storage.read.budgets.get(A, budget.budget_id))?.usage.alerts_fired ?? [];
        expect([...fired].sort((a, b) => a - b)).toEqual([50, 80, 100]);
        expect(await tx((t) => t.budgets.markAlertsFired(A, budget.budget_id, NEXT_MONTH.start, [90]))).toEqual([]);
      });
    });

    describe('policies and the ruleset version', () => {
      it('stores policies, lists them by id, bumps the version by one', async () => {
        const policies = [aPolicy(A, 'one'), aPolicy(A, 'two'), aPolicy(A, 'three')];
        expect(await storage.read.policies.version(A)).toBe(0);
        for (const p of policies) {
          await tx(async (t) => {
            await t.policies.insert(A, p);
            await t.policies.bumpVersion(A);
          });
        }
        expect(await storage.read.policies.get(A, policies[0]!.policy_id)).toEqual(policies[0]);
        expect(await storage.read.policies.get(B, policies[0]!.policy_id)).toBeUndefined();
        expect((await collectPages((page) => storage.read.policies.list(A, page))).map((p) => p.policy_id)).toEqual(
          policies.map((p) => p.policy_id).sort(),
        );
        expect(await storage.read.policies.version(A)).toBe(3);
        expect(await storage.read.policies.version(B)).toBe(0);
        const bumped = await Promise.all(Array.from({ length: 10 }, () => tx((t) => t.policies.bumpVersion(A))));
        expect(bumped.sort((a, b) => a - b)).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        await expect(tx((t) => t.policies.insert(A, policies[1]!))).rejects.toMatchObject({
          code: 'SVC-SYS-9008',
          fieldViolations: [{ field: 'policy_id' }],
        });
      });

      it('replaces a policy only over the version the caller read (compare and set), and removes it', async () => {
        const policy = aPolicy(A, 'one');
        await tx((t) => t.policies.insert(A, policy));
        const revised = { ...policy, name: 'renamed', version: policy.version + 1, updated_at: at(5) };
        expect(await tx((t) => t.policies.replace(B, revised, policy.version))).toBe(false);
        expect(await tx((t) => t.policies.replace(A, revised, policy.version))).toBe(true);
        expect(await tx((t) => t.policies.replace(A, { ...revised, name: 'late' }, policy.version))).toBe(false);
        expect(await storage.read.policies.get(A, policy.policy_id)).toEqual(revised);
        expect(await tx((t) => t.policies.replace(A, aPolicy(A, 'never-stored'), 1))).toBe(false);

        expect(await tx((t) => t.policies.remove(B, policy.policy_id))).toBe(false);
        expect(await tx((t) => t.policies.remove(A, policy.policy_id))).toBe(true);
        expect(await tx((t) => t.policies.remove(A, policy.policy_id))).toBe(false);
        expect(await storage.read.policies.get(A, policy.policy_id)).toBeUndefined();
        expect((await storage.read.policies.list(A)).items).toEqual([]);
      });
    });

    describe('API keys', () => {
      it('stores keys with a global id lookup; an id taken in any tenant is SVC-SYS-9008', async () => {
        const key = anApiKey(A);
        await tx((t) => t.apiKeys.insert(A, key));
        expect(await storage.read.apiKeys.get(A, key.id)).toEqual(key);
        expect(await storage.read.apiKeys.get(B, key.id)).toBeUndefined();
        expect(await storage.read.apiKeys.tenantOf(key.id)).toBe(A);
        expect(await storage.read.apiKeys.tenantOf('0000000000000000')).toBeUndefined();
        await expect(tx((t) => t.apiKeys.insert(B, { ...anApiKey(B), id: key.id }))).rejects.toMatchObject({
          code: 'SVC-SYS-9008',
          fieldViolations: [{ field: 'id' }],
        });
        expect(await storage.read.apiKeys.tenantOf(key.id)).toBe(A);
        expect((await storage.read.apiKeys.list(B)).items).toEqual([]);
      });

      it('revokes once: a second revocation keeps the first time', async () => {
        const key = anApiKey(A);
        await tx((t) => t.apiKeys.insert(A, key));
        expect(await tx((t) => t.apiKeys.revoke(A, key.id, at(1)))).toMatchObject({ revoked_at: at(1) });
        expect(await tx((t) => t.apiKeys.revoke(A, key.id, at(2)))).toMatchObject({ revoked_at: at(1) });
        expect(await tx((t) => t.apiKeys.revoke(B, key.id, at(3)))).toBeUndefined();
        expect((await storage.read.apiKeys.get(A, key.id))?.revoked_at).toBe(at(1));
      });

      it('revokes the keys a key created and theirs, in any tenant; a revoked key holds unrevoked no more', async () => {
        const root = anApiKey(A);
        const child = { ...anApiKey(B), created_by: root.id };
        const grandchild = { ...anApiKey(A), created_by: child.id };
        const early = { ...anApiKey(A), created_by: child.id };
        const other = anApiKey(A);
        const otherChild = { ...anApiKey(A), created_by: other.id };
        await tx(async (t) => {
          for (const [tenant, key] of [
            [A, root],
            [B, child],
            [A, grandchild],
            [A, early],
            [A, other],
            [A, otherChild],
          ] as const)
            await t.apiKeys.insert(tenant, key);
        });
        expect(await tx((t) => t.apiKeys.revoke(A, early.id, at(1)))).toMatchObject({ revoked_at: at(1) });
        expect(await tx((t) => t.apiKeys.revoke(A, root.id, at(2)))).toMatchObject({ id: root.id, revoked_at: at(2) });
        expect((await storage.read.apiKeys.get(B, child.id))?.revoked_at).toBe(at(2));
        expect((await storage.read.apiKeys.get(A, grandchild.id))?.revoked_at).toBe(at(2));
        expect((await storage.read.apiKeys.get(A, early.id))?.revoked_at).toBe(at(1));
        expect((await storage.read.apiKeys.get(A, other.id))?.revoked_at).toBeNull();
        expect((await storage.read.apiKeys.get(A, otherChild.id))?.revoked_at).toBeNull();

        expect(await tx((t) => t.apiKeys.holdUnrevoked(other.id))).toBe(true);
        expect(await tx((t) => t.apiKeys.holdUnrevoked(grandchild.id))).toBe(false);
        expect(await tx((t) => t.apiKeys.holdUnrevoked('0000000000000000'))).toBe(false);
      });
    });

    describe('audit', () => {
      it('chains appends per tenant and lists them newest or oldest first, filtered', async () => {
        await tx(async (t) => {
          await t.audit.append(A, anAuditDraft('policy.create', 'k1'));
          await t.audit.append(A, anAuditDraft('envelope.create', 'k2'));
          await t.audit.append(B, anAuditDraft('budget.create', 'k3'));
          await t.audit.append(A, anAuditDraft('policy.evaluate', 'k1'));
        });
        expect(await verifiedChainLength(storage, A)).toBe(3);
        expect(await verifiedChainLength(storage, B)).toBe(1);
        const newest = await storage.read.audit.list(A, { order: 'newest' });
        expect(newest.items.map((r) => r.action)).toEqual(['policy.evaluate', 'envelope.create', 'policy.create']);
        expect(newest.items.every((r) => r.tenant_id === A)).toBe(true);
        const filtered = await storage.read.audit.list(A, { order: 'newest', resourceType: 'policy', actorId: 'k1' });
        expect(filtered.items.map((r) => r.seq)).toEqual([3, 1]);
        expect((await storage.read.audit.list(A, { order: 'oldest', action: 'envelope.create' })).items[0]?.seq).toBe(
          2,
        );
        const { items, sizes } = await walk((page) => storage.read.audit.list(A, { order: 'newest' }, page), 2);
        expect(items.map((r) => r.seq)).toEqual([3, 2, 1]);
        expect(sizes).toEqual([2, 1]);
      });

      it('walks a filter that matches little across more records than one page reads, each match once', async () => {
        const records = FILTER_SCAN_LIMIT * 2 + 10;
        await tx(async (t) => {
          for (let i = 1; i <= records; i++)
            await t.audit.append(A, anAuditDraft(i % 700 === 0 ? 'policy.update' : 'envelope.create', `k${i % 3}`));
        });
        const updates = Array.from({ length: records }, (_, i) => i + 1).filter((seq) => seq % 700 === 0);
        for (const order of ['newest', 'oldest'] as const) {
          const { items, sizes } = await walk(
            (page) => storage.read.audit.list(A, { order, action: 'policy.update' }, page),
            2,
          );
          expect(items.map((r) => r.seq)).toEqual(order === 'newest' ? [...updates].reverse() : updates);
          expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
        }
        const none = await walk((page) => storage.read.audit.list(A, { order: 'newest', actorId: 'nobody' }, page), 5);
        expect(none.items).toEqual([]);
      });

      it('keeps one valid chain under 50 concurrent appending transactions', async () => {
        await Promise.all(Array.from({ length: 50 }, (_, i) => tx((t) => t.audit.append(A, anAuditDraft(`a.${i}`)))));
        expect(await verifiedChainLength(storage, A)).toBe(50);
      });
    });

    describe('events', () => {
      it('stores each event id once, across calls and within one, and lists newest first', async () => {
        const envelopeId = 'env-1';
        const first = anEvent(A, { envelope_id: envelopeId, event_type: 'llm.call' });
        const second = anEvent(A, { envelope_id: envelopeId, event_type: 'tool.call' });
        const other = anEvent(A, { event_type: 'llm.stream' });
        expect(await tx((t) => t.events.insertNew(A, [first, second, first]))).toEqual([
          first.event_id,
          second.event_id,
        ]);
        expect(await tx((t) => t.events.insertNew(A, [second, other]))).toEqual([other.event_id]);
        expect(await tx((t) => t.events.insertNew(B, [first]))).toEqual([first.event_id]);
        expect(await storage.read.events.get(A, first.event_id)).toEqual(first);
        const all = await storage.read.events.list(A, {});
        expect(all.items.map((e) => e.event_id)).toEqual([other.event_id, second.event_id, first.event_id]);
        const ofEnvelope = await storage.read.events.list(A, { envelopeId });
        expect(ofEnvelope.items.map((e) => e.event_id)).toEqual([second.event_id, first.event_id]);
        const llm = await storage.read.events.list(A, { eventType: 'llm.*' });
        expect(llm.items.map((e) => e.event_id)).toEqual([other.event_id, first.event_id]);
        expect((await storage.read.events.list(A, { eventType: 'tool.call' })).items).toEqual([second]);
        expect((await storage.read.events.list(B, {})).items.map((e) => e.event_id)).toEqual([first.event_id]);
      });

      it("keeps each envelope's events apart, whatever its id holds", async () => {
        const ids = ['U', 'U/1', 'U/1/2', 'U/'];
        const events = ids.map((envelopeId) => anEvent(A, { envelope_id: envelopeId }));
        await tx((t) => t.events.insertNew(A, events));
        for (const [i, envelopeId] of ids.entries())
          expect((await storage.read.events.list(A, { envelopeId })).items).toEqual([events[i]]);
        await tx((t) => t.events.removeReceivedBefore(A, at(60_000), 10));
        for (const envelopeId of ids) expect((await storage.read.events.list(A, { envelopeId })).items).toEqual([]);
      });

      it('removes the oldest events received before a time, in bounded batches, and keeps the newer', async () => {
        const envelopeId = 'env-r';
        const old = Array.from({ length: 5 }, (_, i) =>
          anEvent(A, { envelope_id: envelopeId, received_at: at(-40 * DAY + i) }),
        );
        const fresh = Array.from({ length: 3 }, (_, i) => anEvent(A, { envelope_id: envelopeId, received_at: at(i) }));
        const otherTenant = anEvent(B, { received_at: at(-40 * DAY) });
        await tx((t) => t.events.insertNew(A, old.slice(0, 3)));
        await tx((t) => t.events.insertNew(A, old.slice(3)));
        await tx((t) => t.events.insertNew(A, fresh));
        await tx((t) => t.events.insertNew(B, [otherTenant]));
        const cutoff = at(-30 * DAY);
        const batches: number[] = [];
        for (;;) {
          const removed = await tx((t) => t.events.removeReceivedBefore(A, cutoff, 2));
          batches.push(removed);
          if (removed < 2) break;
        }
        expect(batches).toEqual([2, 2, 1]);
        const newestFirst = fresh.map((e) => e.event_id).reverse();
        expect((await storage.read.events.list(A, {})).items.map((e) => e.event_id)).toEqual(newestFirst);
        expect((await storage.read.events.list(A, { envelopeId })).items.map((e) => e.event_id)).toEqual(newestFirst);
        expect(await storage.read.events.get(A, old[0]!.event_id)).toBeUndefined();
        expect(await storage.read.events.get(B, otherTenant.event_id)).toEqual(otherTenant);
      });

      it('stops removing at the first event received after the time, in arrival order', async () => {
        const [first, later, lateOld] = [
          anEvent(A, { received_at: at(-40 * DAY) }),
          anEvent(A, { received_at: at() }),
          anEvent(A, { received_at: at(-40 * DAY) }),
        ];
        for (const e of [first, later, lateOld]) await tx((t) => t.events.insertNew(A, [e]));
        expect(await tx((t) => t.events.removeReceivedBefore(A, at(-30 * DAY), 10))).toBe(1);
        expect((await storage.read.events.list(A, {})).items.map((e) => e.event_id)).toEqual([
          lateOld.event_id,
          later.event_id,
        ]);
      });

      it('walks a filter that matches little across more events than one page reads, each match once', async () => {
        const events = Array.from({ length: FILTER_SCAN_LIMIT * 2 + 10 }, (_, i) =>
          anEvent(A, {
            envelope_id: i % 2 === 0 ? 'env-even' : 'env-odd',
            event_type: i % 600 === 0 ? 'tool.call' : 'llm.call',
          }),
        );
        await tx((t) => t.events.insertNew(A, events));
        const newestFirst = (keep: (e: (typeof events)[number]) => boolean) =>
          events
            .filter(keep)
            .map((e) => e.event_id)
            .reverse();
        const cases = [
          { filter: { eventType: 'tool.call' }, keep: (e: (typeof events)[number]) => e.event_type === 'tool.call' },
          { filter: { eventType: 'tool.*' }, keep: (e: (typeof events)[number]) => e.event_type === 'tool.call' },
          {
            filter: { envelopeId: 'env-even', eventType: 'tool.call' },
            keep: (e: (typeof events)[number]) => e.envelope_id === 'env-even' && e.event_type === 'tool.call',
          },
          { filter: { eventType: 'nothing.*' }, keep: () => false },
        ];
        for (const { filter, keep } of cases) {
          const { items, sizes } = await walk((page) => storage.read.events.list(A, filter, page), 2);
          expect(items.map((e) => e.event_id)).toEqual(newestFirst(keep));
          expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
        }
      });

      it('pages through events in arrival order', async () => {
        const events = Array.from({ length: 7 }, () => anEvent(A, { envelope_id: 'env' }));
        for (const e of events) await tx((t) => t.events.insertNew(A, [e]));
        const { items, sizes } = await walk((page) => storage.read.events.list(A, { envelopeId: 'env' }, page), 3);
        expect(items.map((e) => e.event_id)).toEqual(events.map((e) => e.event_id).reverse());
        expect(sizes).toEqual([3, 3, 1]);
      });
    });

    describe('detections', () => {
      const detection = (id: string, recordedAt: string, fields: Partial<ImmuneDetection> = {}) =>
        aDetection(A, { detection_id: id, detected_at: recordedAt, recorded_at: recordedAt, ...fields });

      it('stores each detection id once, per tenant, and lists newest first by time then id', async () => {
        const early = detection('d-1', '2026-03-01T10:00:00.000Z');
        const late = detection('d-2', '2026-03-01T11:00:00.000Z', { kind: 'sequence', execution_id: 'exec-2' });
        const sameTime = detection('d-3', '2026-03-01T11:00:00.000Z', { envelope_id: 'env-2' });
        expect(await tx((t) => t.detections.insert(A, early))).toBe(true);
        expect(await tx((t) => t.detections.insert(A, late))).toBe(true);
        expect(await tx((t) => t.detections.insert(A, sameTime))).toBe(true);
        // A replay of the same id changes nothing, even with other fields.
        expect(await tx((t) => t.detections.insert(A, { ...early, recorded_at: '2026-03-02T00:00:00.000Z' }))).toBe(
          false,
        );
        expect(await tx((t) => t.detections.insert(B, early))).toBe(true);
        const ids = async (filter: DetectionFilter) =>
          (await storage.read.detections.list(A, filter)).items.map((d) => d.detection_id);
        expect(await ids({})).toEqual(['d-3', 'd-2', 'd-1']);
        expect((await storage.read.detections.list(A, {})).items[2]).toEqual(early);
        expect(await ids({ kind: 'sequence' })).toEqual(['d-2']);
        expect(await ids({ envelopeId: 'env-1' })).toEqual(['d-2', 'd-1']);
        expect(await ids({ executionId: 'exec-1' })).toEqual(['d-3', 'd-1']);
        expect(await ids({ since: '2026-03-01T11:00:00.000Z' })).toEqual(['d-3', 'd-2']);
        expect(await ids({ until: '2026-03-01T11:00:00.000Z' })).toEqual(['d-1']);
        expect(
          await ids({ since: '2026-03-01T10:30:00.000Z', until: '2026-03-01T12:00:00.000Z', kind: 'call_rate' }),
        ).toEqual(['d-3']);
        expect((await storage.read.detections.list(B, {})).items.map((d) => d.detection_id)).toEqual(['d-1']);
      });

      it('pages through filtered detections, and leaves nothing of a failed transaction', async () => {
        for (let i = 0; i < 7; i++)
          await tx((t) =>
            t.detections.insert(
              A,
              detection(`p-${i}`, `2026-03-01T10:0${i}:00.000Z`, { kind: i % 2 === 0 ? 'spend' : 'call_rate' }),
            ),
          );
        const { items, sizes } = await walk((page) => storage.read.detections.list(A, { kind: 'spend' }, page), 2);
        expect(items.map((d) => d.detection_id)).toEqual(['p-6', 'p-4', 'p-2', 'p-0']);
        expect(sizes).toEqual([2, 2]);
        await expect(
          tx(async (t) => {
            await t.detections.insert(A, detection('lost', '2026-03-01T12:00:00.000Z'));
            throw new Error('rolled back');
          }),
        ).rejects.toThrow('rolled back');
        expect((await storage.read.detections.list(A, {})).items.map((d) => d.detection_id)).not.toContain('lost');
      });

      it('walks a filter that matches little across more detections than one page reads, each match once', async () => {
        const made = Array.from({ length: FILTER_SCAN_LIMIT * 2 + 10 }, (_, i) =>
          detection(`w-${String(i).padStart(5, '0')}`, at(i * 1000), {
            kind: i % 600 === 0 ? 'sequence' : 'call_rate',
          }),
        );
        await tx(async (t) => {
          for (const d of made) await t.detections.insert(A, d);
        });
        const newestFirst = (keep: (d: ImmuneDetection) => boolean) =>
          made
            .filter(keep)
            .map((d) => d.detection_id)
            .reverse();
        const cases: Array<{ filter: DetectionFilter; keep: (d: ImmuneDetection) => boolean }> = [
          { filter: { kind: 'sequence' }, keep: (d) => d.kind === 'sequence' },
          {
            filter: { kind: 'sequence', since: at(1000_000) },
            keep: (d) => d.kind === 'sequence' && d.detected_at >= at(1000_000),
          },
          { filter: { until: at(1000) }, keep: (d) => d.detected_at < at(1000) },
          { filter: { executionId: 'nobody' }, keep: () => false },
        ];
        for (const { filter, keep } of cases) {
          const { items, sizes } = await walk((page) => storage.read.detections.list(A, filter, page), 2);
          expect(items.map((d) => d.detection_id)).toEqual(newestFirst(keep));
          expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
        }
      });

      it('removes the oldest detections made before a time, a batch at a time, in one tenant only', async () => {
        for (let i = 0; i < 5; i++) await tx((t) => t.detections.insert(A, detection(`r-${i}`, at(i * 1000))));
        await tx((t) => t.detections.insert(B, detection('r-b', at(0))));
        expect(await tx((t) => t.detections.removeDetectedBefore(A, at(3000), 2))).toBe(2);
        expect(await tx((t) => t.detections.removeDetectedBefore(A, at(3000), 2))).toBe(1);
        expect(await tx((t) => t.detections.removeDetectedBefore(A, at(3000), 2))).toBe(0);
        const left = (await storage.read.detections.list(A, {})).items.map((d) => d.detection_id);
        expect(left).toEqual(['r-4', 'r-3']);
        expect((await storage.read.detections.list(B, {})).items).toHaveLength(1);
        // A removed id may be stored again (the retention is far past any replay).
        expect(await tx((t) => t.detections.insert(A, detection('r-0', at(5000))))).toBe(true);
      });

      it("orders, filters and retires detections by the time they were recorded, not the reporter's", async () => {
        const future = '9999-12-31T23:59:59.000Z';
        const claimsFuture = detection('f-1', at(1000), { detected_at: future });
        await tx((t) => t.detections.insert(A, claimsFuture));
        await tx((t) => t.detections.insert(A, detection('f-2', at(2000))));
        const ids = async (filter: DetectionFilter) =>
          (await storage.read.detections.list(A, filter)).items.map((d) => d.detection_id);
        expect(await ids({})).toEqual(['f-2', 'f-1']);
        expect(await ids({ since: at(1500) })).toEqual(['f-2']);
        expect(await ids({ until: at(1500) })).toEqual(['f-1']);
        expect(await ids({ since: '9999-01-01T00:00:00.000Z' })).toEqual([]);
        // The reported time stays as data.
        expect((await storage.read.detections.list(A, { until: at(1500) })).items[0]).toEqual(claimsFuture);
        expect(await tx((t) => t.detections.removeDetectedBefore(A, at(1500), 10))).toBe(1);
        expect(await ids({})).toEqual(['f-2']);
      });
    });

    describe('leases and unapplied spend', () => {
      const lease = (budgetId: string, leaseId: string, micros: number, expiresIn: number) => ({
        lease_id: leaseId,
        holder: `holder-${leaseId}`,
        budget_id: budgetId,
        tokens: null,
        micros,
        expires_at: at(expiresIn),
      });

      it('sums the live leases of a budget, leaving out expired ones and the one asked', async () => {
        await tx(async (t) => {
          await t.leases.put(A, lease('b1', 'l1', 100, 60_000));
          await t.leases.put(A, lease('b1', 'l2', 20, 60_000));
          await t.leases.put(A, lease('b1', 'gone', 1000, -1));
          await t.leases.put(A, lease('b2', 'l3', 5, 60_000));
          await t.leases.put(B, lease('b1', 'l4', 7, 60_000));
        });
        expect(await storage.read.leases.outstanding(A, 'b1', at())).toEqual({ tokens: 0, micros: 120 });
        expect(await storage.read.leases.outstanding(A, 'b1', at(), 'l1')).toEqual({ tokens: 0, micros: 20 });
        expect(await storage.read.leases.outstanding(B, 'b1', at())).toEqual({ tokens: 0, micros: 7 });
        expect(await storage.read.leases.get(A, 'b1', 'l2')).toEqual(lease('b1', 'l2', 20, 60_000));
        expect(await storage.read.leases.get(B, 'b1', 'l2')).toBeUndefined();
        await tx(async (t) => {
          await t.leases.put(A, lease('b1', 'l2', 50, 60_000));
          await t.leases.remove(A, 'b1', 'l1');
        });
        expect(await storage.read.leases.outstanding(A, 'b1', at())).toEqual({ tokens: 0, micros: 50 });
      });

      it('keeps reported minus applied spend per period, reset in a new one', async () => {
        const add = (side: 'reported' | 'applied', micros: number, period = MONTH.start) =>
          tx((t) => t.leases.addSpend(A, 'b1', period, side, { tokens: 1, micros }));
        await add('reported', 100);
        await add('reported', 50);
        await add('applied', 30);
        expect(await storage.read.leases.pendingSpend(A, 'b1', MONTH.start)).toEqual({ tokens: 1, micros: 120 });
        await add('applied', 500);
        expect(await storage.read.leases.pendingSpend(A, 'b1', MONTH.start)).toEqual({ tokens: 0, micros: 0 });
        expect(await storage.read.leases.pendingSpend(B, 'b1', MONTH.start)).toEqual({ tokens: 0, micros: 0 });
        await add('reported', 9, NEXT_MONTH.start);
        expect(await storage.read.leases.pendingSpend(A, 'b1', NEXT_MONTH.start)).toEqual({ tokens: 1, micros: 9 });
        expect(await storage.read.leases.pendingSpend(A, 'b1', MONTH.start)).toEqual({ tokens: 0, micros: 0 });
      });

      it('holds the spend totals at their maximum however much is added, and goes on adding', async () => {
        const add = (side: 'reported' | 'applied', amount: number) =>
          tx((t) => t.leases.addSpend(A, 'b1', MONTH.start, side, { tokens: amount, micros: amount }));
        // Past a PostgreSQL bigint (2^63 − 1) many times over.
        for (let i = 0; i < 3; i++) await add('reported', Number.MAX_VALUE);
        await add('applied', 1);
        expect(await storage.read.leases.pendingSpend(A, 'b1', MONTH.start)).toEqual({
          tokens: MAX_TOTAL - 1,
          micros: MAX_TOTAL - 1,
        });
        for (let i = 0; i < 3; i++) await add('applied', MAX_TOTAL);
        await add('reported', 5);
        expect(await storage.read.leases.pendingSpend(A, 'b1', MONTH.start)).toEqual({ tokens: 0, micros: 0 });
      });

      it('counts each report of a holder once, a late one of its earlier reports not at all', async () => {
        const claim = (tenant: string, budgetId: string, holder: string, seq: number) =>
          tx((t) => t.leases.claimReport(tenant, budgetId, holder, seq, at()));
        expect(await claim(A, 'b1', 'h1', 1)).toBe(true);
        expect(await claim(A, 'b1', 'h1', 1)).toBe(false);
        expect(await claim(A, 'b1', 'h1', 2)).toBe(true);
        expect(await claim(A, 'b1', 'h1', 1)).toBe(false);
        expect(await claim(A, 'b1', 'h2', 1)).toBe(true);
        expect(await claim(A, 'b2', 'h1', 1)).toBe(true);
        expect(await claim(B, 'b1', 'h1', 1)).toBe(true);
        // A claim in a transaction that fails is not kept.
        await expect(
          tx(async (t) => {
            await t.leases.claimReport(A, 'b1', 'h1', 3, at());
            throw new Error('rolled back');
          }),
        ).rejects.toThrow('rolled back');
        expect(await claim(A, 'b1', 'h1', 3)).toBe(true);
      });

      /** A $1 budget, and renewals of holder h1's lease on it wanting 100,000 micro-dollars. */
      async function renewals() {
        const budget = aBudget(A, { limits: { ...NO_LIMITS, max_cost_usd: 1 } });
        await tx((t) => t.budgets.insert(A, budget));
        const ledger = new LeaseLedger(storage, () => NOW, 60_000);
        const renew = (extra: Partial<LeaseRequest>) =>
          tx((t) =>
            ledger.handle(
              t,
              A,
              LeaseRequestSchema.parse({
                tenant_id: A,
                budget_id: budget.budget_id,
                holder: 'h1',
                want_tokens: 0,
                want_micros: 100_000,
                ...extra,
              }),
            ),
          );
        return { budget, renew };
      }

      it('lets the ledger count a renewal sent again after its answer was lost once', async () => {
        const { budget, renew } = await renewals();
        const pending = async () => (await storage.read.leases.pendingSpend(A, budget.budget_id, MONTH.start)).micros;
        const { lease_id } = await renew({});
        const first = await renew({ lease_id, spent_micros: 30_000, report_seq: 1 });
        expect(await pending()).toBe(30_000);
        // The same report again: the spend counted once, and the lease the lost answer granted.
        const again = await renew({ lease_id, spent_micros: 30_000, report_seq: 1 });
        expect(again).toMatchObject({ lease_id, status: 'active', micros: first.micros });
        expect(await pending()).toBe(30_000);
        await renew({ lease_id, spent_micros: 30_000, report_seq: 2 });
        expect(await pending()).toBe(60_000);
        // Without a number (an older proxy) every request counts.
        await renew({ lease_id, spent_micros: 5_000 });
        await renew({ lease_id, spent_micros: 5_000 });
        expect(await pending()).toBe(70_000);
      });

      it('answers a renewal whose reported spend is past every total', async () => {
        const { budget, renew } = await renewals();
        const { lease_id } = await renew({});
        for (let seq = 1; seq <= 3; seq++) {
          const grant = await renew({ lease_id, spent_tokens: MAX_TOTAL, spent_micros: MAX_TOTAL, report_seq: seq });
          expect(grant).toMatchObject({ lease_id, micros: 0 });
        }
        expect(await storage.read.leases.pendingSpend(A, budget.budget_id, MONTH.start)).toEqual({
          tokens: MAX_TOTAL,
          micros: MAX_TOTAL,
        });
      });
    });

    describe('approvals', () => {
      it('stores, reads and lists approvals per tenant', async () => {
        const approval = anApproval(A);
        await tx((t) => t.approvals.insert(A, approval));
        expect(await storage.read.approvals.get(A, approval.approval_id)).toEqual(approval);
        expect(await storage.read.approvals.get(B, approval.approval_id)).toBeUndefined();
        expect((await storage.read.approvals.list(A, {})).items).toEqual([approval]);
        expect((await storage.read.approvals.list(B, {})).items).toEqual([]);
        await expect(tx((t) => t.approvals.insert(A, approval))).rejects.toMatchObject({ code: 'SVC-SYS-9008' });
      });

      it('decides a pending approval once (compare and set): a second decision, another tenant or an absent id changes nothing', async () => {
        const approval = anApproval(A);
        await tx((t) => t.approvals.insert(A, approval));
        const approve = { status: 'APPROVED' as const, decided_at: at(5), reviewer_id: 'alice', review_note: 'fine' };
        const reject = { status: 'REJECTED' as const, decided_at: at(6), reviewer_id: 'bob', review_note: undefined };
        expect(await tx((t) => t.approvals.decide(B, approval.approval_id, approve))).toBeUndefined();
        expect(await tx((t) => t.approvals.decide(A, 'no-such-approval', approve))).toBeUndefined();
        const decided = { ...approval, ...approve };
        expect(await tx((t) => t.approvals.decide(A, approval.approval_id, approve))).toEqual(decided);
        expect(await tx((t) => t.approvals.decide(A, approval.approval_id, reject))).toBeUndefined();
        expect(await storage.read.approvals.get(A, approval.approval_id)).toEqual(decided);

        const other = anApproval(A);
        await tx((t) => t.approvals.insert(A, other));
        const outcomes = await Promise.all(
          ['r1', 'r2', 'r3', 'r4'].map((reviewer) =>
            tx((t) => t.approvals.decide(A, other.approval_id, { ...reject, reviewer_id: reviewer })),
          ),
        );
        const winners = outcomes.filter((o) => o !== undefined);
        expect(winners).toHaveLength(1);
        expect(await storage.read.approvals.get(A, other.approval_id)).toEqual(winners[0]);
        expect(Object.hasOwn(winners[0]!, 'review_note')).toBe(false);
      });

      it('lists one status alone, in id order, and moves an approval to its new status when decided', async () => {
        const ids = Array.from({ length: 7 }, (_, i) => `00000000-0000-4000-8000-00000000000${i}`);
        await tx(async (t) => {
          for (const id of ids) await t.approvals.insert(A, { ...anApproval(A), approval_id: id });
          await t.approvals.insert(B, { ...anApproval(B), approval_id: ids[0]! });
        });
        const approve = {
          status: 'APPROVED' as const,
          decided_at: at(5),
          reviewer_id: 'alice',
          review_note: undefined,
        };
        await tx(async (t) => {
          for (const id of [ids[1]!, ids[3]!, ids[4]!]) await t.approvals.decide(A, id, approve);
        });
        const listed = async (status: 'PENDING' | 'APPROVED' | 'REJECTED') =>
          (await walk((p) => storage.read.approvals.list(A, { status }, p), 2)).items.map((a) => a.approval_id);
        expect(await listed('PENDING')).toEqual([ids[0], ids[2], ids[5], ids[6]]);
        expect(await listed('APPROVED')).toEqual([ids[1], ids[3], ids[4]]);
        expect(await listed('REJECTED')).toEqual([]);
        expect((await storage.read.approvals.list(B, { status: 'PENDING' })).items.map((a) => a.approval_id)).toEqual([
          ids[0],
        ]);
        const pending = await storage.read.approvals.list(A, { status: 'PENDING' }, { pageSize: 2 });
        const approved = await storage.read.approvals.list(
          A,
          { status: 'APPROVED' },
          { pageSize: 2, pageToken: pending.nextPageToken },
        );
        // A token is a position in id order: the next approved after the second pending.
        expect(approved.items.map((a) => a.approval_id)).toEqual([ids[3], ids[4]]);
      });
    });

    /**
     * A tenant's store admits a new execution only below its bound (2 here), per tenant; an
     * execution already stored is admitted whatever the count; of concurrent first writes of new
     * executions, those past the bound are turned away.
     */
    async function admitsNewExecutionsBelowTheBound(
      admit: (t: Repositories, tenant: string, executionId: string) => Promise<boolean>,
      /** Writes the execution's first checkpoint or context; false when the store refused it. */
      store: (t: Repositories, tenant: string, executionId: string) => Promise<boolean>,
    ): Promise<void> {
      const admitted = (tenant: string, id: string) => tx((t) => admit(t, tenant, id));
      expect(await admitted(A, 'exec-1')).toBe(true);
      await tx((t) => store(t, A, 'exec-1'));
      await tx((t) => store(t, A, 'exec-2'));
      expect(await admitted(A, 'exec-1')).toBe(true);
      expect(await admitted(A, 'exec-3')).toBe(false);
      expect(await admitted(B, 'exec-3')).toBe(true);
      const outcomes = await Promise.all(
        ['n1', 'n2', 'n3'].map((id) =>
          tx(async (t) => {
            if (!(await admit(t, B, id))) return false;
            return store(t, B, id);
          }),
        ),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(2);
    }

    describe('checkpoints', () => {
      const versionsOf = async (tenant: string, executionId: string) =>
        (await collectPages((p) => storage.read.checkpoints.versions(tenant, executionId, p))).map((c) => c.version);

      it('admits checkpoints of an execution new to the tenant only below the bound, one at a time', async () => {
        await admitsNewExecutionsBelowTheBound(
          (t, tenant, id) => t.checkpoints.admitExecution(tenant, id, 2),
          async (t, tenant, id) => {
            await t.checkpoints.insert(tenant, aCheckpoint(tenant, { execution_id: id, checkpoint_id: id }), 'next');
            return true;
          },
        );
      });

      it('numbers versions per execution, never twice (not after pruning either), and refuses a taken version or id', async () => {
        const first = await tx((t) => t.checkpoints.insert(A, aCheckpoint(A), 'next'));
        const second = await tx((t) => t.checkpoints.insert(A, aCheckpoint(A), 'next'));
        const elsewhere = await tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { execution_id: 'exec-2' }), 'next'));
        expect([first.version, second.version, elsewhere.version]).toEqual([1, 2, 1]);
        expect(await storage.read.checkpoints.get(A, 'exec-1', 2)).toEqual(second);
        expect(await storage.read.checkpoints.get(B, 'exec-1', 2)).toBeUndefined();

        const given = await tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { version: 7 }), 'given'));
        expect(given.version).toBe(7);
        await expect(tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { version: 7 }), 'given'))).rejects.toMatchObject(
          {
            code: 'SVC-SYS-9008',
            fieldViolations: [{ field: 'checkpoint.version' }],
          },
        );
        // The id of exec-1's checkpoint cannot name a version of another execution.
        await expect(
          tx((t) =>
            t.checkpoints.insert(
              A,
              aCheckpoint(A, { checkpoint_id: first.checkpoint_id, execution_id: 'exec-2' }),
              'next',
            ),
          ),
        ).rejects.toMatchObject({ code: 'SVC-SYS-9008', fieldViolations: [{ field: 'checkpoint.checkpoint_id' }] });
        // Nothing of a refused save is kept, not even the version it took.
        expect(await versionsOf(A, 'exec-2')).toEqual([1]);

        expect(await tx((t) => t.checkpoints.prune(A, 'exec-1', 2))).toBe(1);
        expect(await versionsOf(A, 'exec-1')).toEqual([7, 2]);
        const next = await tx((t) => t.checkpoints.insert(A, aCheckpoint(A), 'next'));
        expect(next.version).toBe(8);
        expect(await tx((t) => t.checkpoints.prune(A, 'exec-1', 1))).toBe(2);
        expect(await versionsOf(A, 'exec-1')).toEqual([8]);
        // The last version an int32 holds has no next one.
        await tx((t) =>
          t.checkpoints.insert(A, aCheckpoint(A, { execution_id: 'exec-max', version: 2_147_483_647 }), 'given'),
        );
        await expect(
          tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { execution_id: 'exec-max' }), 'next')),
        ).rejects.toMatchObject({ code: 'SVC-SYS-9002', fieldViolations: [{ field: 'checkpoint.version' }] });
        // Another tenant's execution of the same id has versions of its own.
        expect((await tx((t) => t.checkpoints.insert(B, aCheckpoint(B), 'next'))).version).toBe(1);
      });

      it('finds the newest version saved under a checkpoint id, and pages versions newest first', async () => {
        const id = 'thread-1';
        for (let i = 0; i < 5; i++)
          await tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { checkpoint_id: i === 3 ? 'other' : id }), 'next'));
        expect((await storage.read.checkpoints.latest(A, id))?.version).toBe(5);
        expect((await storage.read.checkpoints.latest(A, 'other'))?.version).toBe(4);
        expect(await storage.read.checkpoints.latest(B, id)).toBeUndefined();
        const { items, sizes } = await walk((p) => storage.read.checkpoints.versions(A, 'exec-1', p), 2);
        expect(items.map((c) => c.version)).toEqual([5, 4, 3, 2, 1]);
        expect(sizes).toEqual([2, 2, 1]);
      });

      it('soft-deletes (kept, marked, out of lists) or removes the versions of an id or of the whole execution', async () => {
        const saved = [];
        for (let i = 0; i < 4; i++)
          saved.push(await tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { checkpoint_id: `c${i % 2}` }), 'next')));
        expect(await tx((t) => t.checkpoints.delete(A, 'exec-1', 'c0', { soft: at(10) }))).toBe(2);
        expect(await storage.read.checkpoints.get(A, 'exec-1', 1)).toEqual({ ...saved[0], deleted_at: at(10) });
        expect(await versionsOf(A, 'exec-1')).toEqual([4, 2]);
        // A second soft delete keeps the first mark.
        await tx((t) => t.checkpoints.delete(A, 'exec-1', null, { soft: at(20) }));
        expect((await storage.read.checkpoints.get(A, 'exec-1', 1))?.deleted_at).toBe(at(10));
        expect((await storage.read.checkpoints.get(A, 'exec-1', 2))?.deleted_at).toBe(at(20));
        expect((await storage.read.checkpoints.query(A, {}, 'created_at desc')).items).toEqual([]);
        const everything = await storage.read.checkpoints.query(A, { includeDeleted: true }, 'created_at asc');
        expect(everything.items.map((c) => [c.version, c.deleted_at])).toEqual([
          [1, at(10)],
          [2, at(20)],
          [3, at(10)],
          [4, at(20)],
        ]);
        expect(await tx((t) => t.checkpoints.delete(B, 'exec-1', null, 'hard'))).toBe(0);
        expect(await tx((t) => t.checkpoints.delete(A, 'exec-1', 'c1', 'hard'))).toBe(2);
        expect(await storage.read.checkpoints.latest(A, 'c1')).toBeUndefined();
        expect(await tx((t) => t.checkpoints.delete(A, 'exec-1', null, 'hard'))).toBe(2);
        expect(await storage.read.checkpoints.get(A, 'exec-1', 1)).toBeUndefined();
        // The id is free again once no version carries it.
        await tx((t) =>
          t.checkpoints.insert(A, aCheckpoint(A, { checkpoint_id: 'c0', execution_id: 'exec-9' }), 'next'),
        );
        expect((await storage.read.checkpoints.latest(A, 'c0'))?.execution_id).toBe('exec-9');
      });

      it('queries by every filter (lists any of, tags all of, inclusive ranges), ordered by creation either way', async () => {
        const c = [
          aCheckpoint(A, { envelope_id: 'e1', execution_id: 'x1', created_at: at(1000), data: { a: 1 } }),
          aCheckpoint(A, {
            envelope_id: 'e1',
            execution_id: 'x1',
            created_at: at(2000),
            metadata: {
              type: 'ERROR',
              framework_type: 'crewai',
              current_node: null,
              cost_snapshot_usd: 2,
              tags: { team: 'red', env: 'prod' },
            },
            data: { a: 'x'.repeat(100) },
          }),
          aCheckpoint(A, {
            envelope_id: 'e2',
            execution_id: 'x2',
            created_at: at(3000),
            metadata: {
              type: null,
              framework_type: null,
              current_node: null,
              cost_snapshot_usd: 5,
              tags: { team: 'red' },
            },
            data: { a: 'y'.repeat(1000) },
          }),
          aCheckpoint(A, { envelope_id: 'e3', execution_id: 'x3', created_at: at(3000) }),
        ].map((x) => ({ ...x, size_bytes: Buffer.byteLength(JSON.stringify(x.data)) }));
        for (const x of c) await tx((t) => t.checkpoints.insert(A, x, 'next'));
        await tx((t) => t.checkpoints.insert(B, aCheckpoint(B, { envelope_id: 'e1', execution_id: 'x1' }), 'next'));
        const ids = async (
          filter: Parameters<Storage['read']['checkpoints']['query']>[1],
          order = 'created_at desc' as const,
        ) =>
          (await collectPages((p) => storage.read.checkpoints.query(A, filter, order, p))).map((x) => x.checkpoint_id);
        const [c0, c1, c2, c3] = c.map((x) => x.checkpoint_id);
        // Same time: by version, then execution id, in the direction asked.
        expect(await ids({})).toEqual([c3, c2, c1, c0]);
        expect(await ids({}, 'created_at asc' as never)).toEqual([c0, c1, c2, c3]);
        expect(await ids({ envelopeIds: ['e1', 'e3'] })).toEqual([c3, c1, c0]);
        expect(await ids({ executionIds: ['x2'] })).toEqual([c2]);
        expect(await ids({ types: ['ERROR', 'MANUAL'] })).toEqual([c1]);
        expect(await ids({ frameworkTypes: ['langgraph'] })).toEqual([c3, c0]);
        expect(await ids({ tags: { team: 'red' } })).toEqual([c2, c1]);
        expect(await ids({ tags: { team: 'red', env: 'prod' } })).toEqual([c1]);
        expect(await ids({ tags: { team: 'blue' } })).toEqual([]);
        expect(await ids({ minCostUsd: 2, maxCostUsd: 5 })).toEqual([c2, c1]);
        expect(await ids({ maxCostUsd: 1 })).toEqual([c3, c0]);
        expect(await ids({ minSizeBytes: 100, maxSizeBytes: 200 })).toEqual([c1]);
        expect(await ids({ minSizeBytes: 1000 })).toEqual([c2]);
        expect(await ids({ createdAfter: at(2000), createdBefore: at(2000) })).toEqual([c1]);
        expect(await ids({ createdAfter: at(2500) })).toEqual([c3, c2]);
        const { items, sizes } = await walk((p) => storage.read.checkpoints.query(A, {}, 'created_at asc', p), 3);
        expect(items.map((x) => x.checkpoint_id)).toEqual([c0, c1, c2, c3]);
        expect(sizes).toEqual([3, 1]);
        expect((await storage.read.checkpoints.query(B, {}, 'created_at desc')).items).toHaveLength(1);
      });
      it('walks a query or the versions that match little across more checkpoints than one page reads, each match once', async () => {
        const count = FILTER_SCAN_LIMIT * 2 + 10;
        const saved = await tx(async (t) => {
          const stored = [];
          for (let i = 0; i < count; i++)
            stored.push(
              await t.checkpoints.insert(
                A,
                aCheckpoint(A, {
                  execution_id: `x-${i % 5}`,
                  // Pairs share a time: the order goes on by version, then execution id.
                  created_at: at(Math.floor(i / 2) * 1000),
                  metadata: { ...aCheckpoint(A).metadata, tags: i % 600 === 0 ? { rare: 'y' } : {} },
                }),
                'next',
              ),
            );
          return stored;
        });
        const oldestFirst = [...saved].sort(
          (a, b) =>
            a.created_at.localeCompare(b.created_at) ||
            a.version - b.version ||
            a.execution_id.localeCompare(b.execution_id),
        );
        const cases: Array<{ filter: CheckpointFilter; keep: (c: Checkpoint) => boolean }> = [
          { filter: { tags: { rare: 'y' } }, keep: (c: Checkpoint) => Object.hasOwn(c.metadata.tags, 'rare') },
          {
            filter: { executionIds: ['x-3', 'x-1', 'x-3'], tags: { rare: 'y' } },
            keep: (c: Checkpoint) => ['x-1', 'x-3'].includes(c.execution_id) && Object.hasOwn(c.metadata.tags, 'rare'),
          },
          { filter: { tags: { nope: 'x' } }, keep: () => false },
        ];
        for (const { filter, keep } of cases)
          for (const order of ['created_at asc', 'created_at desc'] as const) {
            const { items, sizes } = await walk((p) => storage.read.checkpoints.query(A, filter, order, p), 2);
            const expected = oldestFirst.filter(keep).map((c) => c.checkpoint_id);
            expect(items.map((c) => c.checkpoint_id)).toEqual(
              order === 'created_at asc' ? expected : expected.reverse(),
            );
            expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
          }
        const two = await walk(
          (p) => storage.read.checkpoints.query(A, { executionIds: ['x-1', 'x-4'] }, 'created_at asc', p),
          100,
        );
        expect(two.items.map((c) => c.checkpoint_id)).toEqual(
          oldestFirst.filter((c) => ['x-1', 'x-4'].includes(c.execution_id)).map((c) => c.checkpoint_id),
        );
        // Every version of x-0 but its first soft-deleted: the versions list walks past them.
        await tx((t) => t.checkpoints.delete(A, 'x-0', null, { soft: at() }));
        await tx((t) => t.checkpoints.insert(A, aCheckpoint(A, { execution_id: 'x-0', version: 1_000_000 }), 'given'));
        const first = saved.find((c) => c.execution_id === 'x-2' && c.version === 1)!;
        await tx((t) => t.checkpoints.delete(A, 'x-2', null, { soft: at() }));
        const versions = await walk((p) => storage.read.checkpoints.versions(A, 'x-0', p), 2);
        expect(versions.items.map((c) => c.version)).toEqual([1_000_000]);
        expect((await walk((p) => storage.read.checkpoints.versions(A, 'x-2', p), 2)).items).toEqual([]);
        expect(await storage.read.checkpoints.get(A, 'x-2', 1)).toEqual({ ...first, deleted_at: at() });
      });
    });

    describe('execution contexts', () => {
      const context = (tenant: string, version: number, values: Record<string, unknown>) => ({
        execution_id: 'exec-1',
        tenant_id: tenant,
        values,
        version,
        updated_at: at(version),
      });

      it('stores a context only over the version expected (compare and set), per tenant', async () => {
        expect(await tx((t) => t.executionContexts.put(A, context(A, 1, { a: 1 }), 1))).toBe(false);
        expect(await storage.read.executionContexts.get(A, 'exec-1')).toBeUndefined();
        expect(await tx((t) => t.executionContexts.put(A, context(A, 1, { a: 1 }), 0))).toBe(true);
        expect(await tx((t) => t.executionContexts.put(A, context(A, 1, { a: 2 }), 0))).toBe(false);
        expect(await tx((t) => t.executionContexts.put(A, context(A, 2, { a: 3 }), 1))).toBe(true);
        expect(await tx((t) => t.executionContexts.put(A, context(A, 2, { a: 4 }), 1))).toBe(false);
        expect(await storage.read.executionContexts.get(A, 'exec-1')).toEqual(context(A, 2, { a: 3 }));
        expect(await storage.read.executionContexts.get(B, 'exec-1')).toBeUndefined();
        expect(await tx((t) => t.executionContexts.put(B, context(B, 1, { b: 1 }), 0))).toBe(true);
        expect((await storage.read.executionContexts.get(A, 'exec-1'))?.values).toEqual({ a: 3 });
        await tx((t) => t.executionContexts.put(A, { ...context(A, 1, {}), execution_id: 'exec-0' }, 0));
        const { items, sizes } = await walk((p) => storage.read.executionContexts.list(A, p), 1);
        expect(items.map((c) => c.execution_id)).toEqual(['exec-0', 'exec-1']);
        expect(sizes).toEqual([1, 1]);
        expect((await storage.read.executionContexts.list(B)).items.map((c) => c.values)).toEqual([{ b: 1 }]);
      });

      it('admits a context of an execution new to the tenant only below the bound, one at a time', async () => {
        await admitsNewExecutionsBelowTheBound(
          (t, tenant, id) => t.executionContexts.admit(tenant, id, 2),
          (t, tenant, id) => t.executionContexts.put(tenant, { ...context(tenant, 1, {}), execution_id: id }, 0),
        );
      });

      it('lets exactly one of concurrent writers expecting one version through', async () => {
        await tx((t) => t.executionContexts.put(A, context(A, 1, {}), 0));
        const outcomes = await Promise.all(
          [1, 2, 3, 4].map((n) => tx((t) => t.executionContexts.put(A, context(A, 2, { n }), 1))),
        );
        expect(outcomes.filter(Boolean)).toHaveLength(1);
        const winner = outcomes.indexOf(true) + 1;
        expect((await storage.read.executionContexts.get(A, 'exec-1'))?.values).toEqual({ n: winner });
      });
    });

    describe('outbox', () => {
      const message = (n: number) => ({ id: `m-${n}`, subject: 'svc.tenant-a.events.llm.call', data: { n } });

      it('hands out what transactions appended in commit order, each to one claim, and removes what is settled', async () => {
        await tx((t) => t.outbox.append([message(1), message(2)]));
        await expect(
          tx(async (t) => {
            await t.outbox.append([message(99)]);
            throw new Error('rolled back');
          }),
        ).rejects.toThrow('rolled back');
        await tx((t) => t.outbox.append([message(3)]));
        expect((await storage.outbox.depth()).entries).toBe(3);

        const first = await storage.outbox.claim(2);
        const second = await storage.outbox.claim(10);
        expect(first.entries.map((e) => e.event)).toEqual([message(1), message(2)]);
        expect(second.entries.map((e) => e.event)).toEqual([message(3)]);
        await second.settle([]);
        await first.settle([first.entries[0]!.key]);
        expect((await storage.outbox.depth()).entries).toBe(2);
        const again = await storage.outbox.claim(10);
        expect(again.entries.map((e) => e.event.id)).toEqual(['m-2', 'm-3']);
        await again.settle(again.entries.map((e) => e.key));
        expect(await storage.outbox.depth()).toEqual({ entries: 0, bytes: 0 });
        expect((await storage.outbox.claim(10)).entries).toEqual([]);
      });

      it('appends events together with the change they announce', async () => {
        const budget = aBudget(A);
        await tx(async (t) => {
          await t.budgets.insert(A, budget);
          await t.outbox.append([message(1)]);
        });
        expect(await storage.read.budgets.get(A, budget.budget_id)).toEqual(budget);
        const claim = await storage.outbox.claim(10);
        expect(claim.entries.map((e) => e.event)).toEqual([message(1)]);
        await claim.settle([]);
      });
    });

    describe('processed messages', () => {
      it('tells the first handling of a message from a repeat, per tenant and scope', async () => {
        expect(await tx((t) => t.dedup.markProcessed(A, 'violation', 'm1', at()))).toBe(true);
        expect(await tx((t) => t.dedup.markProcessed(A, 'violation', 'm1', at()))).toBe(false);
        expect(await tx((t) => t.dedup.markProcessed(B, 'violation', 'm1', at()))).toBe(true);
        expect(await tx((t) => t.dedup.markProcessed(A, 'other', 'm1', at()))).toBe(true);
        await expect(
          tx(async (t) => {
            await t.dedup.markProcessed(A, 'violation', 'm2', at());
            throw new Error('rolled back');
          }),
        ).rejects.toThrow();
        expect(await tx((t) => t.dedup.markProcessed(A, 'violation', 'm2', at()))).toBe(true);
      });

      it('removes the entries of one scope handled before a time, a bounded slice at a time', async () => {
        const old = at(-40 * DAY);
        for (const id of ['a', 'b', 'c', 'd', 'e'])
          await tx((t) => t.dedup.markProcessed(A, 'violation', id, ['b', 'd'].includes(id) ? at() : old));
        await tx((t) => t.dedup.markProcessed(A, 'other', 'a', old));
        await tx((t) => t.dedup.markProcessed(B, 'violation', 'a', old));
        const cutoff = at(-30 * DAY);
        const slices: Array<{ removed: number; next: string | null }> = [];
        let after: string | null = null;
        do {
          const from: string | null = after;
          const slice: { removed: number; next: string | null } = await tx((t) =>
            t.dedup.removeProcessedBefore(A, 'violation', cutoff, from, 2),
          );
          slices.push(slice);
          after = slice.next;
        } while (after !== null);
        expect(slices).toEqual([
          { removed: 1, next: 'b' },
          { removed: 1, next: 'd' },
          { removed: 1, next: null },
        ]);
        // Removed entries are first handlings again; the kept ones, other scopes and tenants stay.
        for (const [tenant, scope, id, first] of [
          [A, 'violation', 'a', true],
          [A, 'violation', 'b', false],
          [A, 'violation', 'c', true],
          [A, 'violation', 'd', false],
          [A, 'violation', 'e', true],
          [A, 'other', 'a', false],
          [B, 'violation', 'a', false],
        ] as const)
          expect(await tx((t) => t.dedup.markProcessed(tenant, scope, id, at()))).toBe(first);
      });
    });

    describe('job leases', () => {
      it('lets one holder run a job until its lease expires or it releases it', async () => {
        const acquire = (holder: string, offsetMs: number) =>
          tx((t) => t.jobs.tryAcquire('retention', holder, 10_000, new Date(NOW.getTime() + offsetMs)));
        expect(await acquire('p1', 0)).toBe(true);
        expect(await acquire('p2', 1_000)).toBe(false);
        expect(await acquire('p1', 5_000)).toBe(true);
        expect(await acquire('p2', 12_000)).toBe(false);
        expect(await acquire('p2', 15_001)).toBe(true);
        expect(await acquire('p1', 16_000)).toBe(false);
        await tx((t) => t.jobs.release('retention', 'p1'));
        expect(await acquire('p1', 17_000)).toBe(false);
        await tx((t) => t.jobs.release('retention', 'p2'));
        expect(await acquire('p1', 17_000)).toBe(true);
        expect(await tx((t) => t.jobs.tryAcquire('alerts', 'p2', 10_000, NOW))).toBe(true);
      });

      it('gives a contested job to exactly one of many concurrent holders', async () => {
        const won = await Promise.all(
          Array.from({ length: 10 }, (_, i) => tx((t) => t.jobs.tryAcquire('sweep', `p${i}`, 10_000, NOW))),
        );
        expect(won.filter(Boolean)).toHaveLength(1);
      });

      it('takes back an acquisition whose transaction failed', async () => {
        await expect(
          tx(async (t) => {
            await t.jobs.tryAcquire('sweep', 'p1', 10_000, NOW);
            throw new Error('rolled back');
          }),
        ).rejects.toThrow();
        expect(await tx((t) => t.jobs.tryAcquire('sweep', 'p2', 10_000, NOW))).toBe(true);
      });
    });

    it('keeps every record of one tenant out of another tenant’s reads', async () => {
      const budget = aBudget(A, { limits: { ...aBudget(A).limits, max_cost_usd: 1 } });
      const envelope = anEnvelope(A, { budget_id: budget.budget_id });
      const policy = aPolicy(A);
      const key = anApiKey(A);
      const approval = anApproval(A);
      const event = anEvent(A, { envelope_id: envelope.envelope_id });
      await tx(async (t) => {
        await t.budgets.insert(A, budget);
        await t.envelopes.insert(A, envelope, { executionTaken: 'refuse' });
        await t.policies.insert(A, policy);
        await t.policies.bumpVersion(A);
        await t.apiKeys.insert(A, key);
        await t.approvals.insert(A, approval);
        await t.events.insertNew(A, [event]);
        await t.audit.append(A, anAuditDraft());
        await t.budgets.addUsage(
          A,
          budget.budget_id,
          { ...ZERO, cost_micros: usdToMicros(0.5) },
          MONTH,
          'refuse',
          at(),
        );
      });
      const r = storage.read;
      expect(await r.budgets.get(B, budget.budget_id)).toBeUndefined();
      expect((await r.budgets.list(B)).items).toEqual([]);
      expect(await r.envelopes.get(B, envelope.envelope_id)).toBeUndefined();
      expect((await r.envelopes.list(B, { budgetId: budget.budget_id })).items).toEqual([]);
      expect((await r.envelopes.listLive(B, budget.budget_id)).items).toEqual([]);
      expect(await r.policies.get(B, policy.policy_id)).toBeUndefined();
      expect((await r.policies.list(B)).items).toEqual([]);
      expect(await r.policies.version(B)).toBe(0);
      expect(await r.apiKeys.get(B, key.id)).toBeUndefined();
      expect((await r.apiKeys.list(B)).items).toEqual([]);
      expect(await r.approvals.get(B, approval.approval_id)).toBeUndefined();
      expect(await r.events.get(B, event.event_id)).toBeUndefined();
      expect((await r.events.list(B, { envelopeId: envelope.envelope_id })).items).toEqual([]);
      expect((await r.audit.list(B, { order: 'newest' })).items).toEqual([]);
      expect(await r.audit.head(B)).toBeUndefined();
      // The same ids written for B are B's own records.
      await tx((t) => t.budgets.insert(B, { ...budget, tenant_id: B }));
      expect((await r.budgets.get(B, budget.budget_id))?.usage.cost_micros).toBe(0);
      expect((await r.budgets.get(A, budget.budget_id))?.usage.cost_micros).toBe(500_000);
    });
  });
}
