import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../core/domain/index.ts';
import { rawLmdb } from '../../test/storage/lmdb-raw.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import { AuditLog } from './audit-log.ts';

let storage: LmdbStorage;
let dir: string;
afterEach(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

async function setup(): Promise<AuditLog> {
  dir = mkdtempSync(join(tmpdir(), 'audit-'));
  ({ storage } = await LmdbStorage.open({ path: dir }));
  const log = new AuditLog(storage);
  await storage.withTransaction(async (tx) => {
    for (const action of ['policy.create', 'envelope.create', 'policy.evaluate']) {
      await log.append(tx, 't1', {
        actor: { type: 'api_key', id: 'k1' },
        action,
        resource: { type: action.split('.')[0]!, id: 'r' },
        result: 'ok',
      });
    }
    await log.append(tx, 't2', {
      actor: { type: 'api_key', id: 'k2' },
      action: 'budget.create',
      resource: { type: 'budget', id: 'b' },
      result: 'ok',
    });
  });
  return log;
}

/** Changes the stored chain as someone with the disk could, then opens the storage again. */
async function tamper(change: (raw: ReturnType<typeof rawLmdb>) => void): Promise<AuditLog> {
  await storage.close();
  const raw = rawLmdb(dir);
  change(raw);
  await raw.close();
  ({ storage } = await LmdbStorage.open({ path: dir }));
  return new AuditLog(storage);
}

describe('AuditLog', () => {
  it('chains records per tenant and verifies them', async () => {
    const log = await setup();
    const records = (await log.query('t1', { limit: 10 })).items;
    expect(records.map((r) => r.seq)).toEqual([3, 2, 1]);
    expect(records[0]!.prev_hash).toBe(records[1]!.hash);
    expect(await log.verify('t1')).toEqual({ valid: true, checked: 3, first_invalid_seq: null, reason: null });
    expect((await log.query('t2', { limit: 10 })).items).toHaveLength(1);
  });

  it('filters by action, resource type and actor', async () => {
    const log = await setup();
    expect((await log.query('t1', { action: 'policy.evaluate', limit: 10 })).items.map((r) => r.action)).toEqual([
      'policy.evaluate',
    ]);
    expect((await log.query('t1', { resource_type: 'policy', limit: 10 })).items).toHaveLength(2);
    expect((await log.query('t1', { actor_id: 'nobody', limit: 10 })).items).toHaveLength(0);
    expect((await log.query('t1', { limit: 2 })).items).toHaveLength(2);
  });

  it('detects an altered record', async () => {
    await setup();
    const log = await tamper((raw) =>
      raw.put('t1', 'audit', 2, { ...raw.get<AuditRecord>('t1', 'audit', 2)!, result: 'deny' }),
    );
    expect(await log.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 2 });
    expect((await log.verify('t2')).valid).toBe(true);
  });

  it('detects a removed record, at the end or in the middle', async () => {
    await setup();
    const atTheEnd = await tamper((raw) => raw.remove('t1', 'audit', 3));
    expect(await atTheEnd.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 3 });
    const inTheMiddle = await tamper((raw) => raw.remove('t1', 'audit', 1));
    expect(await inTheMiddle.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 2 });
  });

  it('verifies a chain longer than one page', async () => {
    const log = await setup();
    await storage.withTransaction(async (tx) => {
      for (let i = 0; i < 250; i++)
        await log.append(tx, 't1', {
          actor: { type: 'system', id: 's' },
          action: 'x',
          resource: { type: 'x', id: 'x' },
          result: 'ok',
        });
    });
    expect(await log.verify('t1')).toEqual({ valid: true, checked: 253, first_invalid_seq: null, reason: null });
    const tampered = await tamper((raw) => raw.remove('t1', 'audit', 180));
    expect(await tampered.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 181, checked: 179 });
  });

  it('keeps the chain whole over text with unpaired surrogates, which storage gives back altered', async () => {
    const log = await setup();
    const odd = 'denied \ud800 and \udfff';
    await storage.withTransaction((tx) =>
      log.append(tx, 't1', {
        actor: { type: 'proxy', id: `proxy:\ud83d` },
        action: 'policy.evaluate',
        resource: { type: 'action', id: 'tool:shell' },
        result: 'deny',
        metadata: { message: odd, [`key\udc00`]: [odd] },
      }),
    );
    expect(await log.verify('t1')).toEqual({ valid: true, checked: 4, first_invalid_seq: null, reason: null });
    const [stored] = (await log.query('t1', { limit: 1 })).items;
    expect(stored!.metadata).toEqual({
      message: 'denied \ufffd and \ufffd',
      ['key\ufffd']: ['denied \ufffd and \ufffd'],
    });
    expect(stored!.actor.id).toBe('proxy:\ufffd');
  });
});
