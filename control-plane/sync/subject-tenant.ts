import { SvcError } from '../../core/errors/index.ts';

/**
 * The tenant of a request on `svc.<tenant>.…`, which a proxy's credentials confine to its own
 * tenant: a body naming another tenant is refused.
 */
export function subjectTenant(subject: string, bodyTenant: string, what: string): string {
  const tenant = subject.split('.')[1] ?? '';
  if (bodyTenant !== tenant) {
    throw new SvcError('SVC-SYS-9004', `${what} for tenant ${bodyTenant} on tenant ${tenant}'s subject`, {}, [
      { field: 'tenant_id', description: 'differs from the subject tenant' },
    ]);
  }
  return tenant;
}
