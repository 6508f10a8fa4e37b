import { z } from 'zod';
import type { AuditRecord } from '../../../core/domain/index.ts';

/** MCP audit shapes (spec 2.9): resource types as MCP names them, onto the canonical ones. */
const MCP_RESOURCE_TYPES: Record<string, string> = {
  Policy: 'policy',
  Budget: 'budget',
  APIKey: 'api_key',
  Approval: 'approval',
  Envelope: 'envelope',
  Tenant: 'tenant',
};
const BY_CANONICAL = Object.fromEntries(Object.entries(MCP_RESOURCE_TYPES).map(([mcp, c]) => [c, mcp]));

/** `APIKey`, `apikey` and `api_key` all name the canonical `api_key`; other names pass unchanged. */
export function canonicalResourceType(name: string): string {
  const folded = name.toLowerCase().replaceAll('_', '');
  const hit = Object.entries(MCP_RESOURCE_TYPES).find(([mcp]) => mcp.toLowerCase() === folded);
  return hit?.[1] ?? name;
}

export const McpAuditEntrySchema = z.object({
  id: z.string(),
  timestamp: z.string(),
  actor: z.object({ type: z.string(), id: z.string() }),
  action: z.string(),
  resource: z.object({ type: z.string(), id: z.string() }),
  result: z.string(),
  changes: z.record(z.string(), z.unknown()),
});

export function toMcpAuditEntry(record: AuditRecord): z.infer<typeof McpAuditEntrySchema> {
  return {
    id: record.audit_id,
    timestamp: record.timestamp,
    actor: record.actor,
    action: record.action,
    resource: { type: BY_CANONICAL[record.resource.type] ?? record.resource.type, id: record.resource.id },
    result: record.result,
    changes: record.metadata,
  };
}
