import { z } from 'zod';
import { MAX_NAME_LENGTH } from '../../../core/domain/index.ts';
import {
  EnforcementSchema,
  POLICY_TYPE_TAG,
  RulesObjectSchema,
  rulesToObject,
  type Policy,
  type PolicyStatus,
} from '../../../core/policy/index.ts';

/** MCP policy shapes (spec 2.9) onto the canonical policy (docs/surfaces.md). */

export const MCP_POLICY_TYPES = ['budget', 'rate_limit', 'content_filter', 'approval', 'custom'] as const;
export const McpPolicyTypeSchema = z.enum(MCP_POLICY_TYPES);
export const McpPolicyStatusSchema = z.enum(['ACTIVE', 'INACTIVE', 'DRAFT']);
export type McpPolicyStatus = z.infer<typeof McpPolicyStatusSchema>;
const TO_CANONICAL: Record<McpPolicyStatus, PolicyStatus> = { ACTIVE: 'ACTIVE', INACTIVE: 'DISABLED', DRAFT: 'DRAFT' };

export function canonicalStatus(status: McpPolicyStatus): PolicyStatus {
  return TO_CANONICAL[status];
}

export function mcpStatus(status: PolicyStatus): McpPolicyStatus {
  return status === 'DISABLED' ? 'INACTIVE' : status;
}

export const McpPolicyNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, dashes and underscores only')
  .max(MAX_NAME_LENGTH);

export const McpPolicySchema = z.object({
  id: z.string(),
  name: z.string(),
  type: McpPolicyTypeSchema,
  status: McpPolicyStatusSchema,
  priority: z.int(),
  description: z.string(),
  rules: RulesObjectSchema,
  enforcement: EnforcementSchema,
  version: z.int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type McpPolicy = z.infer<typeof McpPolicySchema>;

export function toMcpPolicy(p: Policy): McpPolicy {
  const type = McpPolicyTypeSchema.safeParse(p.tags[POLICY_TYPE_TAG]);
  return {
    id: p.policy_id,
    name: p.name,
    type: type.success ? type.data : 'custom',
    status: mcpStatus(p.status),
    priority: p.priority,
    description: p.description,
    rules: rulesToObject(p.rules),
    enforcement: p.enforcement,
    version: p.version,
    created_at: p.created_at,
    updated_at: p.updated_at,
  };
}
