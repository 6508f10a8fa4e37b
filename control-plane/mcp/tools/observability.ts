import { z } from 'zod';
import { MAX_NAME_LENGTH, TimestampSchema } from '../../../core/domain/index.ts';
import { hasScope, requireScope } from '../../auth/scopes.ts';
import { summarisePolicy, summariseUsage } from '../../usage/usage-summary.ts';
import { canonicalResourceType, McpAuditEntrySchema, toMcpAuditEntry } from '../codecs/audit.ts';
import type { McpServices } from '../services.ts';
import { defineTool, hints, type McpTool } from '../tool.ts';

const Tally = { events: z.int(), tokens_input: z.int(), tokens_output: z.int(), cost_usd: z.number() };
const UsageSchema = z.object({
  events: z.int(),
  tokens_input: z.int(),
  tokens_output: z.int(),
  tokens_total: z.int(),
  cost_usd: z.number(),
  by_model: z.array(z.object({ model: z.string(), ...Tally })),
  by_event_type: z.array(z.object({ event_type: z.string(), ...Tally })),
  truncated: z.boolean(),
});
const PolicySchema = z.object({
  evaluations: z.int(),
  denials: z.int(),
  by_decision: z.record(z.string(), z.int()),
  by_action: z.array(z.object({ action: z.string(), evaluations: z.int(), denials: z.int() })),
  truncated: z.boolean(),
});

export function observabilityTools(s: McpServices): McpTool[] {
  return [
    defineTool({
      name: 'get_metrics',
      title: 'Usage, cost and policy metrics',
      description:
        'Totals of recorded events, tokens and cost (by model and event type) and of policy evaluations and denials (by decision and action) in a time range. The policy part takes policies:read as well; `all` leaves it out without.',
      scope: 'events:read',
      hints: hints.read,
      input: z.object({
        metric_type: z.enum(['usage', 'cost', 'policy', 'all']).default('all'),
        start_time: TimestampSchema.optional().describe('ISO 8601; default: from the first record'),
        end_time: TimestampSchema.optional().describe('ISO 8601, exclusive; default: now'),
      }),
      output: z.object({
        start_time: z.string().nullable(),
        end_time: z.string().nullable(),
        usage: UsageSchema.optional(),
        policy: PolicySchema.optional(),
      }),
      run: async (caller, input) => {
        const window = {
          start: input.start_time === undefined ? undefined : new Date(input.start_time),
          end: input.end_time === undefined ? undefined : new Date(input.end_time),
        };
        const wantsUsage = input.metric_type !== 'policy';
        // Evaluation counts and every action evaluated come from the audit log: REST shows them
        // only with policies:read (a trace's evaluations), so events:read alone does not reach them.
        if (input.metric_type === 'policy') requireScope(caller.principal, 'policies:read');
        const wantsPolicy =
          input.metric_type === 'policy' ||
          (input.metric_type === 'all' && hasScope(caller.principal, 'policies:read'));
        const usage = wantsUsage ? await summariseUsage(s.read, caller.tenant, window) : undefined;
        const policy = wantsPolicy ? await summarisePolicy(s.read, caller.tenant, window) : undefined;
        const parts = [
          ...(usage ? [`${usage.events} events, ${usage.tokens_total} tokens, ${usage.cost_usd} USD`] : []),
          ...(policy ? [`${policy.evaluations} policy evaluations, ${policy.denials} denied`] : []),
        ];
        return {
          text: parts.join('; '),
          data: {
            start_time: input.start_time ?? null,
            end_time: input.end_time ?? null,
            ...(usage ? { usage } : {}),
            ...(policy ? { policy } : {}),
          },
        };
      },
    }),
    defineTool({
      name: 'get_audit_log',
      title: 'Audit log',
      description:
        "The tenant's audit entries, newest first: who (actor) did what (action) to which resource, with the changes.",
      scope: 'admin',
      hints: hints.read,
      input: z.object({
        resource_type: z
          .string()
          .max(MAX_NAME_LENGTH)
          .optional()
          .describe('Policy, Budget, APIKey, Approval, Envelope, Tenant'),
        action: z.string().max(MAX_NAME_LENGTH).optional().describe('e.g. policy.create, approval.approve'),
        actor_id: z.string().max(MAX_NAME_LENGTH).optional().describe('an API key id'),
        limit: z.int().min(1).max(1000).default(100),
      }),
      output: z.object({
        entries: z.array(McpAuditEntrySchema),
        truncated: z.boolean().describe('true when the read stopped at its bound before `limit` or the log ended'),
      }),
      run: async (caller, input) => {
        const page = await s.audit.query(caller.tenant, {
          ...(input.action !== undefined ? { action: input.action } : {}),
          ...(input.resource_type !== undefined ? { resource_type: canonicalResourceType(input.resource_type) } : {}),
          ...(input.actor_id !== undefined ? { actor_id: input.actor_id } : {}),
          limit: input.limit,
        });
        return {
          text: `${page.items.length} audit entries`,
          data: { entries: page.items.map(toMcpAuditEntry), truncated: page.nextPageToken !== null },
        };
      },
    }),
  ];
}
