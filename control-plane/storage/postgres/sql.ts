import type { QueryResult, QueryResultRow } from 'pg';

/**
 * What the repositories run their statements on: the pool (reads of committed state, each
 * statement on whichever connection is free) or the one connection of a transaction.
 */
export interface Sql {
  query<R extends QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}

/** A bigint column: node-postgres hands int8 over as a string (it may exceed 2^53; ours never do). */
export function int(value: string | number | null): number {
  return Number(value);
}

/** A bigint column that may be null. */
export function intOrNull(value: string | number | null): number | null {
  return value === null ? null : Number(value);
}
