import { SvcError } from '../../core/errors/index.ts';

/** A unique key taken (SVC-SYS-9008): the same answer from every backend. */
export function taken(field: string, id: string, message: string, description = 'already exists'): SvcError {
  return new SvcError('SVC-SYS-9008', message, { [field]: id }, [{ field, description }]);
}
