import type { Approvals } from '../approvals/approvals.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import type { KeyAdministration } from '../auth/key-administration.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { Policies } from '../policies/policies.ts';
import type { Readers } from '../storage/storage.ts';
import type { Tenants } from '../tenants/tenants.ts';

/** The domain services the MCP tools and resources call: the same ones REST calls. */
export interface McpServices {
  policies: Policies;
  budgets: Budgets;
  approvals: Approvals;
  keys: KeyAdministration;
  audit: AuditLog;
  tenants: Tenants;
  read: Readers;
  clock: () => Date;
  /** The configuration a tenant may see (`tenant://config`): nothing secret. */
  publicConfig: Record<string, unknown>;
}
