import { MAX_NAME_LENGTH } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';

/**
 * Refuses a model name longer than any a provider serves (the control plane's bound on names).
 * The name becomes a metric label, a policy action and part of every event of the call: a
 * megabyte of it would grow the sidecar's series and push its events past the outbox's bound.
 */
export function checkModelName(model: string): void {
  if (model.length <= MAX_NAME_LENGTH) return;
  throw new SvcError(
    'SVC-SYS-9002',
    `invalid request: model: at most ${MAX_NAME_LENGTH} characters, not ${model.length}`,
    { fields: 'model' },
    [{ field: 'model', description: `at most ${MAX_NAME_LENGTH} characters` }],
  );
}
