import { open } from 'lmdb';
import { RECORD_ENCODING } from '../../control-plane/storage/lmdb/record-encoding.ts';

type Key = Array<string | number>;

/**
 * The records of a control plane's LMDB environment as they lie on disk, for tests that change
 * them the way someone with access to the volume could (the audit chain must notice). One process
 * opens an LMDB environment once: the control plane is closed while this is open.
 */
export function rawLmdb(path: string) {
  const root = open({ path, maxDbs: 8, compression: false, ...RECORD_ENCODING });
  const data = root.openDB<unknown, Key>({ name: 'tenant_data' });
  return {
    get<T>(tenant: string, kind: string, id: string | number): T | undefined {
      return data.get([tenant, kind, id]) as T | undefined;
    },
    put(tenant: string, kind: string, id: string | number, value: unknown): void {
      data.putSync([tenant, kind, id], value);
    },
    remove(tenant: string, kind: string, id: string | number): void {
      data.removeSync([tenant, kind, id]);
    },
    close: () => root.close(),
  };
}
