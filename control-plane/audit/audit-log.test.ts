import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../core/domain/index.ts';
import { Store } from '../store/store.ts';
import { AuditLog } from './audit-log.ts';

let store: Store;
afterEach(async () => store.close());

function setup(): AuditLog {
  store = new Store(mkdtempSync(join(tmpdir(), 'audit-')));
  const log = new AuditLog(store);
  store.transaction(() => {
    for (const action of ['policy.create', 'envelope.create', 'policy.evaluate']) {
      log.append('t1', {
        actor: { type: 'api_key', id: 'k1' },
        action,
        resource: { type: action.split('.')[0]!, id: 'r' },
        result: 'ok',
      });
    }
    log.append('t2', {
      actor: { type: 'api_key', id: 'k2' },
      action: 'budget.create',
      resource: { type: 'budget', id: 'b' },
      result: 'ok',
    });
  });
  return log;
}

describe('AuditLog', () => {
  it('chains records per tenant and verifies them', () => {
    const log = setup();
    const records = log.query('t1', { limit: 10 });
    expect(records.map((r) => r.seq)).toEqual([3, 2, 1]);
    expect(records[0]!.prev_hash).toBe(records[1]!.hash);
    expect(log.verify('t1')).toEqual({ valid: true, checked: 3, first_invalid_seq: null, reason: null });
    expect(log.query('t2', { limit: 10 })).toHaveLength(1);
  });

  it('filters by action, resource type and actor', () => {
    const log = setup();
    expect(log.query('t1', { action: 'policy.evaluate', limit: 10 }).map((r) => r.action)).toEqual(['policy.evaluate']);
    expect(log.query('t1', { resource_type: 'policy', limit: 10 })).toHaveLength(2);
    expect(log.query('t1', { actor_id: 'nobody', limit: 10 })).toHaveLength(0);
  });

  it('detects an altered record', () => {
    const log = setup();
    const record = store.get<AuditRecord>('t1', 'audit', 2)!;
    store.transaction(() => store.put('t1', 'audit', 2, { ...record, result: 'deny' }));
    expect(log.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 2 });
    expect(log.verify('t2').valid).toBe(true);
  });

  it('detects a removed record, at the end or in the middle', () => {
    const log = setup();
    store.transaction(() => store.remove('t1', 'audit', 3));
    expect(log.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 3 });
    store.transaction(() => store.remove('t1', 'audit', 1));
    expect(log.verify('t1')).toMatchObject({ valid: false, first_invalid_seq: 2 });
  });

  it('keeps the chain whole over text with unpaired surrogates, which storage gives back altered', () => {
    const log = setup();
    const odd = 'denied \ud800 and \udfff';
    store.transaction(() =>
      log.append('t1', {
        actor: { type: 'proxy', id: `proxy:\ud83d` },
        action: 'policy.evaluate',
        resource: { type: 'action', id: 'tool:shell' },
        result: 'deny',
        metadata: { message: odd, [`key\udc00`]: [odd] },
      }),
    );
    expect(log.verify('t1')).toEqual({ valid: true, checked: 4, first_invalid_seq: null, reason: null });
    const [stored] = log.query('t1', { limit: 1 });
    expect(stored!.metadata).toEqual({
      message: 'denied \ufffd and \ufffd',
      ['key\ufffd']: ['denied \ufffd and \ufffd'],
    });
    expect(stored!.actor.id).toBe('proxy:\ufffd');
  });
});
