import { SvcError } from '../../core/errors/index.ts';

/** A value too large to keep (SVC-SYS-9009), naming the field and the bound. */
export function tooLarge(field: string, bytes: number, limit: number): SvcError {
  const description = `is ${bytes} bytes as JSON; at most ${limit}`;
  return new SvcError('SVC-SYS-9009', `payload too large: ${field} ${description}`, { field, bytes, limit }, [
    { field, description },
  ]);
}

/** SVC-SYS-9006: no checkpoint of the caller's tenant by that id (or version). */
export function checkpointNotFound(what: Record<string, string | number>): SvcError {
  const named = Object.entries(what)
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(', ');
  return new SvcError('SVC-SYS-9006', `checkpoint not found: ${named}`, what);
}

/** SVC-ADP-5006: the context changed since the caller read it. */
export function contextConflict(executionId: string, message: string, details: Record<string, unknown>): SvcError {
  return new SvcError('SVC-ADP-5006', `execution context ${executionId}: ${message}`, {
    execution_id: executionId,
    ...details,
  });
}

/** SVC-ADP-5007: the tenant holds state for as many executions as it may (`setting` says how many). */
export function quotaReached(what: 'checkpoints' | 'an execution context', setting: string, max: number): SvcError {
  return new SvcError(
    'SVC-ADP-5007',
    `checkpoint store quota reached: the tenant has ${what} for ${max} executions, the most ${setting} allows`,
    { setting, limit: max },
  );
}

/** `auto_version` past the last version an int32 holds. */
export function versionsExhausted(executionId: string, last: number): SvcError {
  const description = `execution ${executionId} has reached version ${last}; there is no next one`;
  return new SvcError('SVC-SYS-9002', `invalid request: checkpoint.version: ${description}`, {}, [
    { field: 'checkpoint.version', description },
  ]);
}
