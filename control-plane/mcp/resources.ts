import type { ReadResourceResult, Resource } from '@modelcontextprotocol/sdk/types.js';
import { RpcError } from './errors.ts';
import { toRestEnvelope, type Scope } from '../../core/domain/index.ts';
import { hasScope, requireScope } from '../auth/scopes.ts';
import type { Caller } from '../caller.ts';
import { tenantConfig } from '../tenants/tenant-config.ts';
import { toMcpBudgetStatus } from './codecs/budget.ts';
import { toMcpPolicy } from './codecs/policy.ts';
import type { McpServices } from './services.ts';

/** How many envelopes `envelopes://latest` shows. */
const LATEST_ENVELOPES = 20;
/** `tenant://status` counts pending approvals up to this many. */
const PENDING_COUNT_LIMIT = 1000;

interface McpResource {
  definition: Resource;
  /** What reading it needs; null: any valid credential (it holds nothing of the tenant's data). */
  scope: Scope | null;
  read(caller: Caller): Promise<unknown>;
}

/** The four read-only resources of spec 4.7, each a JSON document read through the domain services. */
export function mcpResources(s: McpServices): McpResource[] {
  const json = { mimeType: 'application/json' };
  return [
    {
      definition: { uri: 'envelopes://latest', name: 'latest-envelopes', title: 'Latest execution envelopes', ...json },
      scope: 'envelopes:read',
      // The creation-time index gives the newest page however many envelopes the tenant has.
      read: async (caller) => ({
        envelopes: (await s.read.envelopes.listNewest(caller.tenant, {}, { pageSize: LATEST_ENVELOPES })).items.map(
          toRestEnvelope,
        ),
      }),
    },
    {
      definition: { uri: 'policies://active', name: 'active-policies', title: 'Active policies', ...json },
      scope: 'policies:read',
      read: async (caller) => ({
        policies: (await s.policies.list(caller.tenant, { status: 'ACTIVE' })).map(toMcpPolicy),
      }),
    },
    {
      definition: { uri: 'tenant://status', name: 'tenant-status', title: 'Tenant status and usage', ...json },
      scope: 'budgets:read',
      read: async (caller) => {
        const now = s.clock();
        const budgets = (await s.budgets.list(caller.tenant, 'all')).map((b) => toMcpBudgetStatus(b, now));
        return {
          tenant_id: caller.tenant,
          status: 'active',
          budgets,
          spend_usd: budgets.reduce((sum, b) => sum + b.spend_usd, 0),
          budgets_exceeded: budgets.filter((b) => b.status === 'exceeded').length,
          // Approvals and the ruleset are policies:read data on every other surface.
          ...(hasScope(caller.principal, 'policies:read')
            ? {
                /** Counted up to PENDING_COUNT_LIMIT. */
                pending_approvals: (
                  await s.approvals.list(caller.tenant, { status: 'PENDING', limit: PENDING_COUNT_LIMIT })
                ).length,
                ruleset_version: await s.policies.version(caller.tenant),
              }
            : {}),
        };
      },
    },
    {
      definition: { uri: 'tenant://config', name: 'tenant-config', title: 'Tenant configuration', ...json },
      scope: null,
      read: (caller) => tenantConfig(s.read, caller, s.publicConfig),
    },
  ];
}

export async function readResource(resources: McpResource[], caller: Caller, uri: string): Promise<ReadResourceResult> {
  const resource = resources.find((r) => r.definition.uri === uri);
  if (resource === undefined) throw new RpcError(-32602, `resource ${uri} not found`, { uri });
  if (resource.scope !== null) requireScope(caller.principal, resource.scope);
  const body = await resource.read(caller);
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(body) }] };
}
