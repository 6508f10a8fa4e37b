import type { QueryResult, QueryResultRow } from 'pg';
import { SvcError } from '../../../core/errors/index.ts';

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

function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  return Array.isArray(value) && value.some(holdsNul);
}

/**
 * `target` refusing a statement one of whose text values holds U+0000, which PostgreSQL's text
 * type cannot store: the caller's bad input (SVC-SYS-9002), not a failed statement (a 500, and an
 * aborted transaction). Documents travel as JSON text, where the character is escaped.
 */
export function refusingNul(target: Sql): Sql {
  return {
    query<R extends QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
      if (values?.some(holdsNul) === true) {
        const description = 'must not contain the NUL character (U+0000)';
        return Promise.reject(
          new SvcError('SVC-SYS-9002', `invalid request: an identifier or text ${description}`, {}, [
            { field: 'value', description },
          ]),
        );
      }
      return target.query<R>(text, values);
    },
  };
}
