import type { Store } from './store.ts';

export interface Migration {
  version: number;
  name: string;
  up(store: Store): void;
}

/**
 * Numbered schema migrations, applied in order at start inside one transaction each.
 * A migration never changes once released; a new change is a new number.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial layout: tenant-prefixed records, global key index',
    up: () => {
      // Version 1 is the layout itself; nothing to convert.
    },
  },
];

export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

export function schemaVersion(store: Store): number {
  return store.getGlobal<number>('meta', 'schema_version') ?? 0;
}

/** Applies every migration newer than the stored version; returns the versions applied. */
export function migrate(store: Store, migrations: readonly Migration[] = MIGRATIONS): number[] {
  const applied: number[] = [];
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (migration.version <= schemaVersion(store)) continue;
    store.transaction(() => {
      migration.up(store);
      store.putGlobal(migration.version, 'meta', 'schema_version');
    });
    applied.push(migration.version);
  }
  return applied;
}
