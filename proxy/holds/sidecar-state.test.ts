import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { openProxyStore, type ProxyStore } from '../store/index.ts';
import { keptSidecarState } from './sidecar-state.ts';

const quiet = { warn: () => undefined };
const dirs: string[] = [];
const open: ProxyStore[] = [];

afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Opens the proxy's store in `dir`, as a start of the proxy does. */
function start(dir: string): ProxyStore {
  const store = openProxyStore(dir, 0);
  open.push(store);
  return store;
}

/** Closes the store, as the proxy's shutdown does, and opens it again. */
async function restart(dir: string, store: ProxyStore): Promise<ProxyStore> {
  open.splice(open.indexOf(store), 1);
  await store.close();
  return start(dir);
}

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sidecar-state-'));
  dirs.push(dir);
  return dir;
}

describe('keptSidecarState', () => {
  it('keeps a pause, its move and its resumption across restarts', async () => {
    const dir = dataDir();
    let store = start(dir);
    const paused = { state: 'paused', anchor: 'env-a', kind: 'call_rate', reason: 'why', ended: null } as const;
    keptSidecarState(store.root, quiet).set(paused);
    store = await restart(dir, store);
    const restarted = keptSidecarState(store.root, quiet);
    expect(restarted.current).toEqual(paused);
    restarted.set({ ...paused, anchor: null, ended: 'env-a' });
    store = await restart(dir, store);
    const again = keptSidecarState(store.root, quiet);
    expect(again.current).toMatchObject({ anchor: null, ended: 'env-a' });
    again.set(null);
    store = await restart(dir, store);
    expect(keptSidecarState(store.root, quiet).current).toBeNull();
  });

  it('keeps a termination, which nothing lifts', async () => {
    const dir = dataDir();
    let store = start(dir);
    const state = keptSidecarState(store.root, quiet);
    expect(state.set({ state: 'terminated', reason: 'immune system: 8 calls' })).toBe(true);
    expect(state.set(null)).toBe(false);
    store = await restart(dir, store);
    const restarted = keptSidecarState(store.root, quiet);
    expect(restarted.current).toEqual({ state: 'terminated', reason: 'immune system: 8 calls' });
    expect(restarted.set({ state: 'paused', anchor: 'x', kind: 'spend', reason: 'r', ended: null })).toBe(false);
  });

  it('reads a kept value that does not parse, or cannot be decoded, as terminated', async () => {
    const dir = dataDir();
    let store = start(dir);
    await store.root.openDB({ name: 'sidecar-state', encoding: 'json' }).put('sidecar', { state: 'resting' });
    store = await restart(dir, store);
    expect(keptSidecarState(store.root, quiet).current).toMatchObject({ state: 'terminated' });
    await store.root.openDB({ name: 'sidecar-state', encoding: 'binary' }).put('sidecar', Buffer.from('{not json'));
    store = await restart(dir, store);
    expect(keptSidecarState(store.root, quiet).current).toMatchObject({ state: 'terminated' });
  });

  it('logs a change it could not keep, and holds it in memory all the same', async () => {
    const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
    // A store whose every write fails, as a full LMDB map or a broken disk makes it.
    const failing = {
      openDB: () => ({
        get: () => undefined,
        put: () => Promise.reject(new Error('MDB_MAP_FULL: Environment mapsize limit reached')),
        remove: () => Promise.reject(new Error('MDB_MAP_FULL: Environment mapsize limit reached')),
      }),
    } as unknown as RootDatabase;
    const state = keptSidecarState(failing, { warn: (fields, message) => warnings.push({ fields, message }) });
    state.set({ state: 'terminated', reason: 'immune system: 8 calls' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(state.current).toMatchObject({ state: 'terminated' });
    expect(warnings).toEqual([
      {
        fields: { sidecar_state: 'terminated', err: 'MDB_MAP_FULL: Environment mapsize limit reached' },
        message: "the sidecar's state was not kept on disk: a restart would not know it",
      },
    ]);
  });
});
