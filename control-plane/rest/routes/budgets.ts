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
import type { Budgets } from '../../budgets/budgets.ts';
import type { RouteTable } from '../route.ts';

const BudgetParams = z.object({ budget_id: PathIdSchema });
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
    summary: "List the tenant's budgets, optionally by status",
    query: BudgetListQuerySchema,
    responses: { 200: { description: 'budgets', schema: z.array(RestBudgetSchema) } },
    handler: async ({ caller, query }) => ({
      status: 200,
      body: (await budgets.list(caller.tenant, query.status)).map((b) => toRestBudget(b, clock())),
    }),
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
