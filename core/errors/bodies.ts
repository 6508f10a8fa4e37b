import { z } from 'zod';

/** Structured error of spec 7.1. */
export const ErrorObjectSchema = z.object({
  code: z.string(),
  message: z.string(),
  details: z.record(z.string(), z.unknown()),
  request_id: z.string(),
  timestamp: z.string(),
  documentation_url: z.string(),
});

export const ErrorBodySchema = z.object({ error: ErrorObjectSchema });

/** 403 body: the PolicyViolation fields of spec 2.1 beside the structured error of 7.1. */
export const PolicyViolationBodySchema = ErrorBodySchema.extend({
  code: z.string(),
  policy_id: z.string(),
  message: z.string(),
  denied_action: z.string(),
});

/** 422 body: the BudgetError fields of spec 2.1 beside the structured error of 7.1. */
export const BudgetErrorBodySchema = ErrorBodySchema.extend({
  code: z.string(),
  budget_id: z.string(),
  current_usage: z.number(),
  limit: z.number(),
  message: z.string(),
});
