import { z } from 'zod';
import {
  BudgetCheckRequestSchema,
  BudgetCheckResultSchema,
  BudgetListQuerySchema,
  BudgetUsageSchema,
  CreateBudgetRequestSchema,
  PathIdSchema,
  RestBudgetSchema,
  toBudgetUsage,
  toRestBudget,
} from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import { pageOldestFirst } from '../../storage/paging.ts';
import type { Budgets } from '../../budgets/budgets.ts';
import { nextPageHeaders, NextPageHeaders, pageRequest, PagingQueryFields } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

const BudgetParams = z.object({ budget_id: PathIdSchema });
const ListQuery = BudgetListQuerySchema.extend(PagingQueryFields);
const notFound = { description: 'budget not found (SVC-BUD-3002)', schema: ErrorBodySchema };

export function budgetRoutes(routes: RouteTable, budgets: Budgets, clock: () => Date): void {
  routes.add({
    method: 'POST',
    path: '/v1/budgets',
    operationId: 'createBudget',
    tag: 'budgets',
    access: 'budgets:write',
    summary: 'Create a budget',
    body: CreateBudgetRequestSchema,
    responses: {
      201: { description: 'created', schema: RestBudgetSchema },
      400: { description: 'invalid request (SVC-SYS-9002)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, body }) => ({
      status: 201,
      body: toRestBudget(await budgets.create(caller, body), clock()),
    }),
  });
  routes.add({
    method: 'GET',
    path: '/v1/budgets',
    operationId: 'listBudgets',
    tag: 'budgets',
    access: 'budgets:read',
    summary:
      "The tenant's budgets, oldest first, optionally by status, a page at a time (next page token in X-Next-Page-Token)",
    query: ListQuery,
    responses: {
      200: { description: 'a page of budgets', schema: z.array(RestBudgetSchema), headers: NextPageHeaders },
    },
    handler: async ({ caller, query }) => {
      const page = pageOldestFirst(
        'budgets',
        await budgets.list(caller.tenant, query.status),
        pageRequest(query),
        (b) => b.budget_id,
      );
      return {
        status: 200,
        body: page.items.map((b) => toRestBudget(b, clock())),
        headers: nextPageHeaders(page.nextPageToken),
      };
    },
  });
  routes.add({
    method: 'GET',
    path: '/v1/budgets/{budget_id}',
    operationId: 'getBudget',
    tag: 'budgets',
    access: 'budgets:read',
    summary: 'Read a budget',
    params: BudgetParams,
    responses: { 200: { description: 'the budget', schema: RestBudgetSchema }, 404: notFound },
    handler: async ({ caller, params }) => ({
      status: 200,
      body: toRestBudget(await budgets.get(caller.tenant, params.budget_id), clock()),
    }),
  });
  routes.add({
    method: 'GET',
    path: '/v1/budgets/{budget_id}/usage',
    operationId: 'getBudgetUsage',
    tag: 'budgets',
    access: 'budgets:read',
    summary: 'Real-time usage of the current period',
    params: BudgetParams,
    responses: { 200: { description: 'usage', schema: BudgetUsageSchema }, 404: notFound },
    handler: async ({ caller, params }) => ({
      status: 200,
      body: toBudgetUsage(await budgets.get(caller.tenant, params.budget_id)),
    }),
  });
  routes.add({
    method: 'POST',
    path: '/v1/budgets/{budget_id}/check',
    operationId: 'checkBudget',
    tag: 'budgets',
    access: 'budgets:read',
    summary: 'Would a call of this estimate fit the budget now?',
    params: BudgetParams,
    body: BudgetCheckRequestSchema,
    bodyOptional: true,
    responses: { 200: { description: 'check result', schema: BudgetCheckResultSchema }, 404: notFound },
    handler: async ({ caller, params, body }) => ({
      status: 200,
      body: await budgets.check(caller.tenant, params.budget_id, body),
    }),
  });
}
