import { z } from 'zod';
import { MAX_TEXT_LENGTH, MetadataSchema, NameSchema } from '../../../core/domain/index.ts';
import { SvcError } from '../../../core/errors/index.ts';
import {
  DecisionSchema,
  POLICY_TYPE_TAG,
  PrioritySchema,
  PolicyWarningSchema,
  RulesObjectInputSchema,
  rulesFromObject,
} from '../../../core/policy/index.ts';
import {
  canonicalStatus,
  McpPolicyNameSchema,
  McpPolicySchema,
  McpPolicyStatusSchema,
  McpPolicyTypeSchema,
  toMcpPolicy,
} from '../codecs/policy.ts';
import { policyPage } from '../../policies/policy-page.ts';
import { McpNextPageToken, mcpPageRequest, McpPagingInput, morePages } from '../paging.ts';
import type { McpServices } from '../services.ts';
import { defineTool, hints, type McpTool } from '../tool.ts';

const PolicyId = z.object({ policy_id: z.string().min(1).max(100) });
const Confirmation = z.object({ policy_id: z.string(), status: z.string(), message: z.string() });
const OnePolicy = z.object({ policy: McpPolicySchema });

export function policyTools(s: McpServices): McpTool[] {
  return [
    defineTool({
      name: 'check_governance',
      title: 'Check an action against the policies',
      description:
        "Evaluates an action (tool:<name>, llm:<model>, execution:start) with its input text against the tenant's active policies. With envelopes:write a REQUIRE_APPROVAL decision opens a pending approval and the evaluation is recorded; with policies:read alone it only decides.",
      scope: 'policies:read',
      hints: hints.create,
      input: z.object({
        action: NameSchema.describe('the action pattern evaluated, e.g. tool:shell'),
        input_text: z
          .string()
          .max(MAX_TEXT_LENGTH * 25)
          .describe('the text of the request, for content conditions'),
        context: MetadataSchema.optional().describe('further context fields (tool_name, model_id, ...)'),
      }),
      output: z.object({
        decision: DecisionSchema,
        allowed: z.boolean(),
        matched_rules: z.array(z.object({ policy_id: z.string(), rule_id: z.string() })),
        actions: z.array(z.string()),
        reason: z.string(),
        approval_id: z.string().nullable(),
        warnings: z.array(PolicyWarningSchema),
      }),
      run: async (caller, input) => {
        const { result, approvalId } = await s.policies.decide(caller, {
          action: input.action,
          context: { ...input.context, input_text: input.input_text },
        });
        const matched =
          result.matched_policy !== null && result.matched_rule !== null
            ? [{ policy_id: result.matched_policy, rule_id: result.matched_rule }]
            : [];
        const actions = [
          result.decision,
          ...(result.enforcement === 'TERMINATE' && !result.allowed ? ['TERMINATE'] : []),
        ];
        return {
          text: `${result.decision}: ${result.reason}${approvalId !== null ? ` (approval ${approvalId})` : ''}`,
          data: {
            decision: result.decision,
            allowed: result.allowed,
            matched_rules: [
              ...matched,
              ...result.warnings.map((w) => ({ policy_id: w.policy_id, rule_id: w.rule_id })),
            ],
            actions,
            reason: result.reason,
            approval_id: approvalId,
            warnings: result.warnings,
          },
        };
      },
    }),
    defineTool({
      name: 'list_policies',
      title: 'List policies',
      description:
        "The tenant's policies, highest priority first, optionally by status, a page at a time (20 unless page_size says otherwise, at most 100).",
      scope: 'policies:read',
      hints: hints.read,
      input: z.object({ status: z.enum(['ACTIVE', 'INACTIVE', 'DRAFT', 'all']).default('all'), ...McpPagingInput }),
      output: z.object({ policies: z.array(McpPolicySchema), ...McpNextPageToken }),
      run: async (caller, input) => {
        const status = input.status === 'all' ? undefined : canonicalStatus(input.status);
        const page = policyPage(await s.policies.list(caller.tenant, { status }), mcpPageRequest(input));
        const policies = page.items.map(toMcpPolicy);
        return {
          text: `${policies.length} policies${morePages(page.nextPageToken)}`,
          data: { policies, next_page_token: page.nextPageToken },
        };
      },
    }),
    defineTool({
      name: 'get_policy',
      title: 'Read a policy',
      description: 'One policy with its rules.',
      scope: 'policies:read',
      hints: hints.read,
      input: PolicyId,
      output: OnePolicy,
      run: async (caller, input) => {
        const policy = toMcpPolicy(await s.policies.get(caller.tenant, input.policy_id));
        return { text: `policy ${policy.name} (${policy.status})`, data: { policy } };
      },
    }),
    defineTool({
      name: 'create_policy',
      title: 'Create a policy',
      description:
        'Creates a policy in DRAFT status (switch it on with update_policy_status ACTIVE). It needs at least one rule.',
      scope: 'policies:write',
      hints: hints.create,
      input: z.object({
        name: McpPolicyNameSchema,
        policy_type: McpPolicyTypeSchema,
        description: z.string().max(MAX_TEXT_LENGTH).optional(),
        priority: PrioritySchema.optional().describe('1 to 1000, higher first; default 100'),
        rules: RulesObjectInputSchema.optional(),
      }),
      output: OnePolicy,
      run: async (caller, input) => {
        const rules = rulesFromObject(input.rules);
        if (rules === undefined || rules.length === 0)
          throw new SvcError('SVC-POL-2003', 'invalid policy: rules: a policy needs at least one rule', {}, [
            { field: 'rules', description: 'at least one rule is required' },
          ]);
        const created = await s.policies.create(caller, {
          name: input.name,
          description: input.description ?? '',
          priority: input.priority ?? 100,
          rules,
          status: 'DRAFT',
          enforcement: 'BLOCK',
          tags: { [POLICY_TYPE_TAG]: input.policy_type },
        });
        const policy = toMcpPolicy(created);
        return { text: `created policy ${policy.name} (${policy.id}) in DRAFT`, data: { policy } };
      },
    }),
    defineTool({
      name: 'update_policy',
      title: 'Change a policy',
      description: 'Changes the fields given (name, description, priority, rules); the others stay.',
      scope: 'policies:write',
      hints: hints.change,
      input: PolicyId.extend({
        name: McpPolicyNameSchema.optional(),
        description: z.string().max(MAX_TEXT_LENGTH).optional(),
        priority: PrioritySchema.optional(),
        rules: RulesObjectInputSchema.optional(),
      }),
      output: OnePolicy,
      run: async (caller, input) => {
        const rules = rulesFromObject(input.rules);
        const updated = await s.policies.update(caller, input.policy_id, {
          name: input.name,
          description: input.description,
          priority: input.priority,
          rules,
        });
        const policy = toMcpPolicy(updated);
        return { text: `updated policy ${policy.name} to version ${policy.version}`, data: { policy } };
      },
    }),
    defineTool({
      name: 'update_policy_status',
      title: 'Switch a policy on or off',
      description: 'ACTIVE enforces the policy, INACTIVE switches it off, DRAFT keeps it out of evaluation.',
      scope: 'policies:write',
      hints: hints.change,
      input: PolicyId.extend({ status: McpPolicyStatusSchema }),
      output: Confirmation,
      run: async (caller, input) => {
        await s.policies.update(caller, input.policy_id, { status: canonicalStatus(input.status) });
        const message = `policy ${input.policy_id} is now ${input.status}`;
        return { text: message, data: { policy_id: input.policy_id, status: input.status, message } };
      },
    }),
    defineTool({
      name: 'delete_policy',
      title: 'Delete a policy',
      description: 'Deletes the policy for good; proxies drop it with the next ruleset.',
      scope: 'policies:write',
      hints: hints.change,
      input: PolicyId,
      output: Confirmation,
      run: async (caller, input) => {
        await s.policies.remove(caller, input.policy_id);
        const message = `policy ${input.policy_id} deleted`;
        return { text: message, data: { policy_id: input.policy_id, status: 'deleted', message } };
      },
    }),
  ];
}
