import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { open, type RootDatabase } from 'lmdb';

type EnvOptions = Parameters<typeof open>[0] & { path: string };

/** Owner only: the stores hold webhook signing secrets, event payloads and audit records. */
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Opens an LMDB environment that only this user can read: its directory (and the data directory
 * above it, when made here) 0700, `data.mdb` and `lock.mdb` 0600. lmdb-js would make them 0755 and
 * 0644 (0664 less the umask). An environment made by an earlier version is tightened too, so an
 * upgrade does not leave its secrets readable by every local user.
 */
export function openPrivateEnv(options: EnvOptions): RootDatabase {
  mkdirSync(dirname(options.path), { recursive: true, mode: DIR_MODE });
  mkdirSync(options.path, { recursive: true, mode: DIR_MODE });
  chmodSync(options.path, DIR_MODE);
  // `permissionsMode` is passed to mdb_env_open, which lmdb-js's typings leave out.
  const root = open({ ...options, permissionsMode: FILE_MODE } as EnvOptions);
  for (const file of ['data.mdb', 'lock.mdb']) {
    const path = join(options.path, file);
    if (existsSync(path)) chmodSync(path, FILE_MODE);
  }
  return root;
}
