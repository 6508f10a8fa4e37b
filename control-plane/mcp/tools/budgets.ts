import { z } from 'zod';
import {
  budgetFromMcp,
  mcpBudgetStatus,
  McpBudgetSchema,
  McpBudgetStatusViewSchema,
  McpCreateBudgetSchema,
  toMcpBudget,
  toMcpBudgetStatus,
} from '../codecs/budget.ts';
import { pageOldestFirst } from '../../storage/paging.ts';
import { McpNextPageToken, mcpPageRequest, McpPagingInput, morePages } from '../paging.ts';
import type { McpServices } from '../services.ts';
import { defineTool, hints, type McpTool } from '../tool.ts';

const BudgetId = z.object({ budget_id: z.string().min(1).max(100) });
const OneBudget = z.object({ budget: McpBudgetSchema });

export function budgetTools(s: McpServices): McpTool[] {
  return [
    defineTool({
      name: 'list_budgets',
      title: 'List budgets',
      description:
        "The tenant's budgets with limit, spend, percentage used and status, oldest first, a page at a time (20 unless page_size says otherwise, at most 100).",
      scope: 'budgets:read',
      hints: hints.read,
      input: z.object({ status: z.enum(['active', 'warning', 'exceeded', 'all']).default('all'), ...McpPagingInput }),
      output: z.object({ budgets: z.array(McpBudgetSchema), ...McpNextPageToken }),
      run: async (caller, input) => {
        const now = s.clock();
        const listed = (await s.budgets.list(caller.tenant, 'all')).filter(
          (b) => input.status === 'all' || mcpBudgetStatus(b, now) === input.status,
        );
        const page = pageOldestFirst('budgets', listed, mcpPageRequest(input), (b) => b.budget_id);
        const budgets = page.items.map((b) => toMcpBudget(b, now));
        return {
          text: `${budgets.length} budgets${morePages(page.nextPageToken)}`,
          data: { budgets, next_page_token: page.nextPageToken },
        };
      },
    }),
    defineTool({
      name: 'get_budget',
      title: 'Read a budget',
      description: 'One budget with its limit, period, scope, alerts and current spend.',
      scope: 'budgets:read',
      hints: hints.read,
      input: BudgetId,
      output: OneBudget,
      run: async (caller, input) => {
        const budget = toMcpBudget(await s.budgets.get(caller.tenant, input.budget_id), s.clock());
        return {
          text: `budget ${budget.name}: ${budget.spend_usd} of ${budget.limit_amount ?? '∞'} USD`,
          data: { budget },
        };
      },
    }),
    defineTool({
      name: 'create_budget',
      title: 'Create a budget',
      description:
        'A cost budget in USD per period. Reaching the limit refuses new envelopes and calls; `action` says what happens to running envelopes.',
      scope: 'budgets:write',
      hints: hints.create,
      input: McpCreateBudgetSchema,
      output: OneBudget,
      run: async (caller, input) => {
        const created = await s.budgets.create(caller, budgetFromMcp(input));
        const budget = toMcpBudget(created, s.clock());
        return { text: `created budget ${budget.name} (${budget.id})`, data: { budget } };
      },
    }),
    defineTool({
      name: 'get_budget_status',
      title: 'Budget status',
      description: 'Spend, remaining, percent used and status of the current period, in real time.',
      scope: 'budgets:read',
      hints: hints.read,
      input: BudgetId,
      output: McpBudgetStatusViewSchema,
      run: async (caller, input) => {
        const status = toMcpBudgetStatus(await s.budgets.get(caller.tenant, input.budget_id), s.clock());
        return { text: `${status.status}: ${status.percent_used}% used, ${status.spend_usd} USD spent`, data: status };
      },
    }),
  ];
}
