import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, schemaVersion, SCHEMA_VERSION, type Migration } from './migrations.ts';
import { Store } from './store.ts';

const stores: Store[] = [];
function openStore(path = mkdtempSync(join(tmpdir(), 'store-'))): Store {
  const store = new Store(path);
  stores.push(store);
  return store;
}
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

describe('Store', () => {
  it('keeps tenants apart by key', () => {
    const store = openStore();
    store.transaction(() => {
      store.put('a', 'budget', 'b1', { n: 1 });
      store.put('b', 'budget', 'b2', { n: 2 });
    });
    expect(store.get('a', 'budget', 'b1')).toEqual({ n: 1 });
    expect(store.get('a', 'budget', 'b2')).toBeUndefined();
    expect([...store.list('a', 'budget')]).toEqual([{ n: 1 }]);
    expect([...store.list('b', 'budget')]).toEqual([{ n: 2 }]);
  });

  it('lists ids of every character, those starting outside the Basic Multilingual Plane included', () => {
    const store = openStore();
    const ids = ['a', '\uffff', '😀', '𝔘x', '\u{10fffd}'];
    store.transaction(() => {
      for (const id of ids) store.put('a', 'envelope', id, id);
      for (const id of ids) store.put('a', 'budget_envelope', `b1/${id}`, id);
    });
    expect([...store.list<string>('a', 'envelope')].sort()).toEqual([...ids].sort());
    expect([...store.list<string>('a', 'budget_envelope', { prefix: 'b1/' })].sort()).toEqual([...ids].sort());
  });

  it('writes nothing when a transaction throws', () => {
    const store = openStore();
    expect(() =>
      store.transaction(() => {
        store.put('a', 'envelope', 'e1', { x: 1 });
        throw new Error('half way');
      }),
    ).toThrow('half way');
    expect(store.get('a', 'envelope', 'e1')).toBeUndefined();
  });

  it('keeps state across a reopen', async () => {
    const path = mkdtempSync(join(tmpdir(), 'store-'));
    const first = new Store(path);
    first.transaction(() => first.put('a', 'policy', 'p', { kept: true }));
    await first.close();
    const second = openStore(path);
    expect(second.get('a', 'policy', 'p')).toEqual({ kept: true });
  });

  it('lists numeric keys in order and in reverse', () => {
    const store = openStore();
    store.transaction(() => {
      for (const seq of [3, 1, 2, 10]) store.put('a', 'audit', seq, { seq });
    });
    expect([...store.listNumeric<{ seq: number }>('a', 'audit')].map((r) => r.seq)).toEqual([1, 2, 3, 10]);
    expect(
      [...store.listNumeric<{ seq: number }>('a', 'audit', { reverse: true, limit: 2 })].map((r) => r.seq),
    ).toEqual([10, 3]);
  });
});

describe('migrate', () => {
  it('applies numbered migrations once, in order', () => {
    const store = openStore();
    const seen: number[] = [];
    const migrations: Migration[] = [
      { version: 2, name: 'two', up: () => seen.push(2) },
      { version: 1, name: 'one', up: () => seen.push(1) },
    ];
    expect(migrate(store, migrations)).toEqual([1, 2]);
    expect(migrate(store, migrations)).toEqual([]);
    expect(seen).toEqual([1, 2]);
    expect(schemaVersion(store)).toBe(2);
  });

  it('brings a new store to the released schema version', () => {
    const store = openStore();
    migrate(store);
    expect(schemaVersion(store)).toBe(SCHEMA_VERSION);
  });
});

describe('Store.batch', () => {
  it('lets reads see pending write-back records and writes them once at commit', () => {
    const store = openStore();
    store.batch(() => {
      for (let i = 1; i <= 100; i++) store.put('a', 'budget', 'b', { n: i });
      expect(store.get('a', 'budget', 'b')).toEqual({ n: 100 });
      expect([...store.list('a', 'budget')]).toEqual([{ n: 100 }]);
      store.put('a', 'budget', 'b', { n: 101 });
    });
    expect(store.get('a', 'budget', 'b')).toEqual({ n: 101 });
  });

  it('writes nothing, pending or not, when the batch throws', () => {
    const store = openStore();
    expect(() =>
      store.batch(() => {
        store.put('a', 'envelope', 'e', { x: 1 });
        store.put('a', 'event', 'v', { y: 1 });
        throw new Error('half way');
      }),
    ).toThrow('half way');
    expect(store.get('a', 'envelope', 'e')).toBeUndefined();
    expect(store.get('a', 'event', 'v')).toBeUndefined();
  });
});
