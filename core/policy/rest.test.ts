import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { createDocument } from 'zod-openapi';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import { compileRuleset, evaluate } from './engine.ts';
import { PolicySchema } from './model.ts';
import {
  policyFromRestCreate,
  RestCreatePolicyRequestSchema,
  RestPolicyEvaluationRequestSchema,
  RestPolicyEvaluationResultSchema,
  RestPolicySchema,
  toRestEvaluationResult,
  toRestPolicy,
} from './rest.ts';

const TENANT = '7b0d2c3e-1111-4a5b-8c9d-0123456789ab';
const POLICY_ID = '5f1e2d3c-2222-4b6a-9c8d-abcdefabcdef';
const creation = { tenantId: TENANT, policyId: POLICY_ID, now: new Date('2026-03-01T10:00:00.000Z') };

function create(body: unknown) {
  return policyFromRestCreate(parseOrThrow(RestCreatePolicyRequestSchema, body), creation);
}

function refusal(body: unknown): SvcError {
  try {
    create(body);
  } catch (error) {
    if (error instanceof SvcError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

const restBody = {
  tenant_id: TENANT,
  name: 'model-guard',
  description: 'keeps agents on approved models',
  priority: 300,
  rules: [
    {
      action: 'llm:gpt-4*',
      effect: 'deny',
      conditions: [{ field: 'budget.percent_used', operator: 'gte', value: 90 }],
    },
    {
      action: 'tool:*',
      effect: 'allow',
      conditions: [{ field: 'tool_name', operator: 'in', value: ['search', 'calculator'] }],
    },
  ],
};

describe('REST policy creation', () => {
  it('builds a canonical, ACTIVE, BLOCK policy with defaults', () => {
    const policy = create(restBody);
    expect(PolicySchema.parse(policy)).toEqual(policy);
    expect(policy).toMatchObject({
      policy_id: POLICY_ID,
      tenant_id: TENANT,
      name: 'model-guard',
      priority: 300,
      status: 'ACTIVE',
      enforcement: 'BLOCK',
      version: 1,
      tags: {},
      created_at: '2026-03-01T10:00:00.000Z',
      updated_at: '2026-03-01T10:00:00.000Z',
    });
    expect(policy.rules[0]).toEqual({
      rule_id: 'rule-1',
      name: 'deny llm:gpt-4*',
      action: 'llm:gpt-4*',
      decision: 'DENY',
      conditions: [{ field: 'budget.percent_used', operator: 'gte', value: 90 }],
    });
    expect(create({ name: 'minimal', rules: [{ action: '*', effect: 'allow' }] })).toMatchObject({
      priority: 100,
      description: '',
      rules: [{ conditions: [] }],
    });
  });

  it('maps enabled, status and enforcement extensions', () => {
    const base = { name: 'p', rules: [{ action: '*', effect: 'deny' }] };
    expect(create({ ...base, enabled: false }).status).toBe('DISABLED');
    expect(create({ ...base, status: 'POLICY_STATUS_DRAFT' }).status).toBe('DRAFT');
    expect(create({ ...base, status: 'INACTIVE' }).status).toBe('DISABLED');
    expect(create({ ...base, enforcement: 'ENFORCEMENT_LEVEL_AUDIT' }).enforcement).toBe('AUDIT');
    expect(refusal({ ...base, enabled: true, status: 'DRAFT' }).fieldViolations.map((v) => v.field)).toEqual([
      'enabled',
    ]);
  });

  it('accepts concept and gRPC operator names and canonical rules with decision', () => {
    const policy = create({
      name: 'concepts',
      rules: [
        {
          rule_id: 'c1',
          name: 'concept names',
          action: 'tool:*',
          decision: 'REQUIRE_APPROVAL',
          message: 'needs a human',
          conditions: [
            { field: 'a', operator: 'EQUALS', value: 'x' },
            { field: 'b', operator: 'NOT_EQUALS', value: 'y' },
            { field: 'c', operator: 'CONTAINS', value: 'z' },
            { field: 'd', operator: 'REGEX', value: '^q' },
            { field: 'e', operator: 'GREATER_THAN', value: 1 },
            { field: 'f', operator: 'LESS_THAN', value: 9 },
            { field: 'g', operator: 'CONDITION_OPERATOR_IN', value: ['k'] },
            { field: 'h', operator: 'SEMANTIC', value: 'DESTRUCTIVE' },
          ],
        },
      ],
    });
    expect(policy.rules[0]?.conditions.map((c) => c.operator)).toEqual([
      'eq',
      'neq',
      'contains',
      'matches',
      'gt',
      'lt',
      'in',
      'semantic',
    ]);
    expect(policy.rules[0]).toMatchObject({ rule_id: 'c1', decision: 'REQUIRE_APPROVAL', message: 'needs a human' });
    expect(create({ name: 'w', rules: [{ action: '*', effect: 'warn' }] }).rules[0]?.decision).toBe('WARN');
  });

  it('refuses request shapes with SVC-SYS-9002 naming the field', () => {
    const cases: Array<[unknown, string]> = [
      [{ ...restBody, name: undefined }, 'name'],
      [{ ...restBody, rules: [] }, 'rules'],
      [{ ...restBody, priority: 0 }, 'priority'],
      [{ ...restBody, priority: 1001 }, 'priority'],
      [{ ...restBody, priority: 1.5 }, 'priority'],
      [{ ...restBody, tenant_id: '' }, 'tenant_id'],
      [{ ...restBody, colour: 'red' }, '(body)'],
      [{ name: 'p', rules: [{ action: '*' }] }, 'rules.0.effect'],
      [{ name: 'p', rules: [{ action: '*', effect: 'maybe' }] }, 'rules.0.effect'],
      [{ name: 'p', rules: [{ action: '*', effect: 'allow', decision: 'DENY' }] }, 'rules.0.decision'],
      [
        {
          name: 'p',
          rules: [{ action: '*', effect: 'deny', conditions: [{ field: 'a', operator: 'like', value: 1 }] }],
        },
        'rules.0.conditions.0.operator',
      ],
      [
        { name: 'p', rules: [{ action: '*', effect: 'deny', conditions: [{ field: 'a', op: 'eq', value: 1 }] }] },
        'rules.0.conditions.0',
      ],
    ];
    for (const [body, field] of cases) {
      const error = refusal(body);
      expect(error.code, JSON.stringify(body)).toBe('SVC-SYS-9002');
      expect(
        error.fieldViolations.map((v) => v.field),
        JSON.stringify(body),
      ).toContain(field);
    }
  });

  it('compiles every condition and refuses what cannot run with SVC-POL-2003 naming the field', () => {
    const error = refusal({
      name: 'broken',
      rules: [
        {
          action: 'tool:*',
          effect: 'deny',
          conditions: [
            { field: 'a', operator: 'eq', value: 1 },
            { field: 'b', operator: 'matches', value: '(unclosed' },
          ],
        },
        { action: '', effect: 'deny' },
        {
          action: 'tool:*',
          effect: 'deny',
          conditions: [
            { field: 'c', operator: 'in', value: 'shell' },
            { field: 'd', operator: 'gt', value: 'lots' },
          ],
        },
        {
          action: 'tool:*',
          effect: 'deny',
          conditions: [
            { field: 'e', operator: 'matches', value: String.raw`(\w)\1` },
            { field: 'f', operator: 'not_in', value: 3 },
          ],
        },
      ],
    });
    expect(error.code).toBe('SVC-POL-2003');
    expect(error.fieldViolations.map((v) => v.field)).toEqual([
      'rules.0.conditions.1.value',
      'rules.1.action',
      'rules.2.conditions.0.value',
      'rules.2.conditions.1.value',
      'rules.3.conditions.0.value',
      'rules.3.conditions.1.value',
    ]);
    expect(error.message).toMatch(/rules\.2\.conditions\.0\.value: in needs an array value/);
  });
});

describe('REST policy shape', () => {
  it('renders the REST Policy with effects and extensions', () => {
    const rest = toRestPolicy(
      create({ ...restBody, rules: [...restBody.rules, { action: 'x', decision: 'REQUIRE_APPROVAL' }] }),
    );
    expect(RestPolicySchema.parse(rest)).toEqual(rest);
    expect(rest).toMatchObject({
      policy_id: POLICY_ID,
      tenant_id: TENANT,
      enabled: true,
      status: 'ACTIVE',
      enforcement: 'BLOCK',
      version: 1,
    });
    expect(rest.rules.map((r) => r.effect)).toEqual(['deny', 'allow', 'require_approval']);
    expect(toRestPolicy(create({ ...restBody, enabled: false })).enabled).toBe(false);
  });

  it('round-trips: a REST policy posted back yields the same canonical policy', () => {
    const original = create({ ...restBody, enforcement: 'WARN', tags: { team: 'risk' } });
    const rest = toRestPolicy(original);
    const { policy_id: _id, created_at: _c, updated_at: _u, version: _v, ...request } = rest;
    expect(create(request)).toEqual(original);
  });
});

describe('REST evaluation', () => {
  it('parses evaluation requests, defaulting context and refusing unknown keys', () => {
    expect(parseOrThrow(RestPolicyEvaluationRequestSchema, { action: 'tool:search' })).toEqual({
      action: 'tool:search',
      context: {},
    });
    expect(() => parseOrThrow(RestPolicyEvaluationRequestSchema, { context: {} })).toThrow(
      expect.objectContaining({ fieldViolations: [expect.objectContaining({ field: 'action' })] }),
    );
    expect(() => parseOrThrow(RestPolicyEvaluationRequestSchema, { action: 'a', envelope_id: 'x' })).toThrow(
      /envelope_id/,
    );
    expect(() => parseOrThrow(RestPolicyEvaluationRequestSchema, { action: 'a', extra: 1 })).toThrow(/extra/);
  });

  it('renders the evaluation result in the REST shape', () => {
    const policy = create(restBody);
    const result = evaluate(compileRuleset([policy], 1), {
      action: 'llm:gpt-4o',
      context: { budget: { percent_used: 95 } },
    });
    const rest = toRestEvaluationResult(result);
    expect(RestPolicyEvaluationResultSchema.parse(rest)).toEqual(rest);
    expect(rest).toMatchObject({
      allowed: false,
      effect: 'deny',
      decision: 'DENY',
      matched_policy: POLICY_ID,
      matched_rule: 'rule-1',
      warnings: [],
    });
    expect(Object.keys(rest).sort()).toEqual([
      'allowed',
      'decision',
      'effect',
      'evaluation_time_ms',
      'matched_policy',
      'matched_rule',
      'reason',
      'warnings',
    ]);
  });
});

describe('OpenAPI rendering', () => {
  it('renders the REST policy schemas, documenting the accepted enum spellings', () => {
    const json = (schema: z.ZodType) => ({ content: { 'application/json': { schema } } });
    const doc = createDocument({
      openapi: '3.1.0',
      info: { title: 'policies', version: '1.0.0' },
      paths: {
        '/v1/policies': {
          post: {
            requestBody: json(RestCreatePolicyRequestSchema),
            responses: { '201': { description: 'created', ...json(RestPolicySchema) } },
          },
        },
        '/v1/policies/evaluate': {
          post: {
            requestBody: json(RestPolicyEvaluationRequestSchema),
            responses: { '200': { description: 'result', ...json(RestPolicyEvaluationResultSchema) } },
          },
        },
      },
    });
    const text = JSON.stringify(doc);
    expect(text).toContain('CONDITION_OPERATOR_*');
    expect(text).toContain('"required":["name","rules"]');
    expect(text).toContain('"enum":["allow","deny","no_match"]');
  });
});
