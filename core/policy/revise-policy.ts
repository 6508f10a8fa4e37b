import { compilePolicy } from './compile-policy.ts';
import type { Policy } from './model.ts';

export type PolicyChanges = Partial<
  Pick<Policy, 'name' | 'description' | 'priority' | 'status' | 'enforcement' | 'rules' | 'tags'>
>;

/**
 * Applies changes to a policy: identity, tenant and creation time stay, `version` goes up by
 * one and `updated_at` moves to `now`. The result is compiled, so a change that would leave
 * the policy unable to run is refused with SVC-POL-2003 before anything is stored.
 */
export function revisePolicy(policy: Policy, changes: PolicyChanges, now: Date): Policy {
  const revised: Policy = {
    ...policy,
    ...stripUndefined(changes),
    policy_id: policy.policy_id,
    tenant_id: policy.tenant_id,
    created_at: policy.created_at,
    version: policy.version + 1,
    updated_at: now.toISOString(),
  };
  compilePolicy(revised);
  return revised;
}

/** An absent change and an `undefined` one both mean "keep". */
function stripUndefined(changes: PolicyChanges): PolicyChanges {
  return Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
}
