import { SvcError } from '../../core/errors/index.ts';
import { TenantIdSchema, type Principal } from '../../core/domain/index.ts';
import type { Tenants } from '../tenants/tenants.ts';

/**
 * The tenant a request acts for. It is the credential's tenant; an administrator may name another
 * with X-Tenant-ID or a `tenant_id` in the body or query. Anyone else naming a different tenant is
 * refused rather than silently corrected, so a misconfigured client learns of it at once.
 */
export async function resolveTenant(
  principal: Principal,
  tenants: Tenants,
  requested: { header?: string | undefined; field?: string | undefined; fieldName?: string },
): Promise<string> {
  const { header, field } = requested;
  if (header !== undefined && field !== undefined && header !== field) {
    throw new SvcError('SVC-SYS-9002', 'X-Tenant-ID and tenant_id name different tenants', {}, [
      { field: requested.fieldName ?? 'tenant_id', description: 'differs from X-Tenant-ID' },
    ]);
  }
  const wanted = field ?? header;
  if (wanted === undefined || wanted === principal.tenant_id) return principal.tenant_id;
  if (!principal.administrator) {
    throw new SvcError(
      'SVC-SYS-9004',
      `this credential belongs to another tenant than ${wanted}`,
      { tenant_id: wanted },
      [
        {
          field: field !== undefined ? (requested.fieldName ?? 'tenant_id') : 'X-Tenant-ID',
          description: "differs from the credential's tenant",
        },
      ],
    );
  }
  if (!(await tenants.exists(wanted)))
    throw new SvcError('SVC-SYS-9006', `tenant ${wanted} not found`, { tenant_id: wanted });
  return wanted;
}

/**
 * The X-Tenant-ID header and a raw `tenant_id` field of a request (REST or gRPC), refused unless
 * they have the form of a tenant id; `fieldName` is how the request names the field.
 */
export function requestedTenant(
  raw: string | string[] | undefined,
  field: string | undefined,
  fieldName = 'tenant_id',
): { header: string | undefined; field: string | undefined; fieldName: string } {
  const check = (value: string | undefined, name: string) => {
    const parsed = value === undefined ? undefined : TenantIdSchema.safeParse(value);
    if (parsed?.success === false) {
      const description = parsed.error.issues.map((issue) => issue.message).join('; ');
      throw new SvcError('SVC-SYS-9002', `invalid request: ${name}: ${description}`, {}, [
        { field: name, description },
      ]);
    }
    return value;
  };
  return {
    header: check(Array.isArray(raw) ? raw.join(',') : raw, 'X-Tenant-ID'),
    field: check(field, fieldName),
    fieldName,
  };
}
