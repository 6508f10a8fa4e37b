import type { Policy } from '../../core/policy/index.ts';
import { pageOfSorted } from '../storage/paging.ts';
import type { Page, PageRequest } from '../storage/storage.ts';

/**
 * A page of policies in list order (highest priority first, the older first among equals, then
 * by id), the same on every surface, so a token from one page request continues it.
 */
export function policyPage<T extends Pick<Policy, 'priority' | 'created_at' | 'policy_id'>>(
  policies: readonly T[],
  request: PageRequest | undefined,
): Page<T> {
  return pageOfSorted(
    policies,
    request,
    (p) => [-p.priority, p.created_at, p.policy_id],
    [
      { type: 'number', order: 'asc' },
      { type: 'string', order: 'asc' },
      { type: 'string', order: 'asc' },
    ],
    'policies',
  );
}
