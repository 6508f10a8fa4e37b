import { setImmediate as turn } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Database, RootDatabase } from 'lmdb';
import { describe, expect, it } from 'vitest';
import type { LmdbOutboxStorage } from '../../../core/outbox/lmdb-outbox-storage.ts';
import { GroupCommit } from './group-commit.ts';
import { Space, StagedView } from './kv.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/** An LMDB whose commits succeed at once and whose flush to disk waits until `flush` is called. */
function slowFlushingRoot(): { root: RootDatabase; db: Database<unknown, never>; flush: () => void } {
  const flushed = Promise.withResolvers<void>();
  const db = { putSync: () => true, removeSync: () => true } as unknown as Database<unknown, never>;
  const root = {
    childTransaction: (write: () => void) => {
      write();
      return Promise.resolve();
    },
    flushed: flushed.promise,
  } as unknown as RootDatabase;
  return { root, db, flush: () => flushed.resolve() };
}

describe('group commit', () => {
  it('lets go of a group’s records once they are written, while their flush to disk is awaited', async () => {
    const { root, db, flush } = slowFlushingRoot();
    const groups = new GroupCommit(root, {} as LmdbOutboxStorage);
    const space = new Space(db, ['acme', 'event'], 'acme/event');
    // Staged as a transaction stages it: nothing here keeps the view or the record once joined.
    const { record, joined } = (() => {
      const value = { event_id: 'e1' };
      const view = new StagedView();
      view.put(space, 'e1', value);
      return { record: new WeakRef(value), joined: groups.join(view, [], groups.failures) };
    })();
    let durable = false;
    const done = joined.then(() => (durable = true));
    await turn();
    collectGarbage();
    expect({ written: record.deref() === undefined, durable }).toEqual({ written: true, durable: false });
    flush();
    await done;
    expect(durable).toBe(true);
  });
});
