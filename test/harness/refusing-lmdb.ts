import { vi } from 'vitest';
import type { RootDatabase } from 'lmdb';

/**
 * Makes the databases that `create` opens on `root` refuse to write any value whose text holds
 * `marker`, as a full map would refuse it, so that the transaction writing it fails. Databases
 * opened later (a reopen) write as usual.
 */
export function refusingWrites<T>(root: RootDatabase, marker: string, create: () => T): T {
  const openDb = root.openDB.bind(root);
  const refusing = vi.spyOn(root, 'openDB').mockImplementation((...args: Parameters<typeof openDb>) => {
    const db = openDb(...args);
    const put = db.putSync.bind(db);
    db.putSync = (key, value) => {
      if (String(value).includes(marker)) throw new Error('MDB_MAP_FULL');
      return put(key, value);
    };
    return db;
  });
  try {
    return create();
  } finally {
    refusing.mockRestore();
  }
}
