import type { PackageDefinition } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  AlertThresholdSchema,
  BudgetPeriodSchema,
  BudgetTypeSchema,
  EnvelopeStatusSchema,
} from '../../core/domain/index.ts';
import {
  ApprovalStatusSchema,
  DECISIONS,
  DecisionInputSchema,
  ENFORCEMENTS,
  EnforcementInputSchema,
  OPERATORS,
  OperatorInputSchema,
  POLICY_STATUSES,
  PolicyStatusInputSchema,
} from '../../core/policy/index.ts';
import { contractFiles, loadContracts } from '../../control-plane/grpc/contracts.ts';
import { listHttpRules } from '../../control-plane/grpc/http-rules.ts';

interface Expected {
  /** Verb, path and body of the google.api.http binding; null where none is mapped. */
  http: readonly [string, string, string | null] | null;
  /** Request fields spec 4.6 (or 2.2) names for the method. */
  request: readonly string[];
  /** Response fields the spec names, where it names them. */
  response?: readonly string[];
}

const PAGE = ['page_size', 'page_token'] as const;

/** Spec 4.6, method by method; EnvelopeService and TenantService bindings are the REST routes serving them. */
const SERVICES: Record<string, Record<string, Expected>> = {
  'svc.envelope.v1.EnvelopeService': {
    CreateEnvelope: {
      http: ['POST', '/v1/envelopes', '*'],
      request: ['tenant_id', 'budget_id', 'adapter_type', 'metadata'],
      response: ['envelope'],
    },
    GetEnvelope: {
      http: ['GET', '/v1/envelopes/{envelope_id}', null],
      request: ['envelope_id'],
      response: ['envelope'],
    },
    UpdateEnvelopeStatus: {
      http: ['POST', '/v1/envelopes/{envelope_id}/status', '*'],
      request: ['envelope_id', 'status', 'reason'],
      response: ['envelope'],
    },
  },
  'svc.policy.v1.PolicyService': {
    CreatePolicy: { http: ['POST', '/v1/policies', 'policy'], request: ['policy'] },
    GetPolicy: { http: ['GET', '/v1/policies/{policy_id}', null], request: ['policy_id'] },
    UpdatePolicy: {
      http: ['PATCH', '/v1/policies/{policy.policy_id}', 'policy'],
      request: ['policy', 'update_mask'],
    },
    DeletePolicy: { http: ['DELETE', '/v1/policies/{policy_id}', null], request: ['policy_id'] },
    ListPolicies: { http: ['GET', '/v1/policies', null], request: ['tenant_id', 'status', 'rule_type', ...PAGE] },
    EvaluatePolicy: {
      http: ['POST', '/v1/policies/evaluate', '*'],
      request: ['policy_id', 'context', 'dry_run'],
      response: ['result'],
    },
    EvaluatePolicies: {
      http: ['POST', '/v1/policies/batch-evaluate', '*'],
      request: ['policy_ids', 'context', 'stop_on_deny', 'dry_run'],
      response: ['results', 'final_decision', 'actions'],
    },
    GetEvaluationHistory: {
      http: ['GET', '/v1/policies/{policy_id}/evaluations', null],
      request: ['policy_id', 'start_time', 'end_time', 'decision', ...PAGE],
    },
    ListApprovals: { http: ['GET', '/v1/approvals', null], request: ['tenant_id', 'status'] },
    UpdateApproval: {
      http: ['PATCH', '/v1/approvals/{approval_id}', '*'],
      request: ['approval_id', 'status', 'reviewer_id', 'review_note'],
    },
  },
  'svc.cost.v1.CostService': {
    CreateBudget: { http: ['POST', '/v1/budgets', 'budget'], request: ['budget'] },
    GetBudget: { http: ['GET', '/v1/budgets/{budget_id}', null], request: ['budget_id'] },
    UpdateBudget: { http: ['PATCH', '/v1/budgets/{budget.budget_id}', 'budget'], request: ['budget', 'update_mask'] },
    DeleteBudget: { http: ['DELETE', '/v1/budgets/{budget_id}', null], request: ['budget_id'] },
    ListBudgets: { http: ['GET', '/v1/budgets', null], request: ['tenant_id', 'workflow_id', 'status', ...PAGE] },
    GetCostSummary: {
      http: ['GET', '/v1/costs/{envelope_id}', null],
      request: ['envelope_id'],
      response: ['cost_summary'],
    },
    GetSpendSummary: {
      http: ['GET', '/v1/spend', null],
      request: ['tenant_id', 'workflow_id', 'start_time', 'end_time', 'group_by'],
    },
    GetBudgetStatus: {
      http: ['GET', '/v1/budgets/{budget_id}/status', null],
      request: ['budget_id'],
      response: ['status'],
    },
    PredictCost: {
      http: ['POST', '/v1/costs/predict', '*'],
      request: [
        'tenant_id',
        'workflow_id',
        'input_text',
        'estimated_input_tokens',
        'model_ids',
        'use_historical_data',
        'lookback_days',
      ],
      response: ['prediction', 'historical_based', 'sample_size'],
    },
  },
  'svc.checkpoint.v1.CheckpointService': {
    SaveCheckpoint: {
      http: ['POST', '/v1/checkpoints', '*'],
      request: ['checkpoint', 'auto_version', 'max_versions'],
      response: ['checkpoint_id'],
    },
    GetCheckpoint: { http: ['GET', '/v1/checkpoints/{checkpoint_id}', null], request: ['checkpoint_id', 'version'] },
    ListCheckpoints: {
      http: ['GET', '/v1/checkpoints', null],
      request: ['tenant_id', 'envelope_id', 'execution_id', ...PAGE, 'order_by'],
    },
    DeleteCheckpoint: {
      http: ['DELETE', '/v1/checkpoints/{checkpoint_id}', null],
      request: ['checkpoint_id', 'soft_delete', 'delete_all_versions'],
    },
    ListCheckpointVersions: {
      http: ['GET', '/v1/checkpoints/{execution_id}/versions', null],
      request: ['execution_id'],
    },
    GetCheckpointVersion: {
      http: ['GET', '/v1/checkpoints/{execution_id}/versions/{version}', null],
      request: ['execution_id', 'version'],
    },
    QueryCheckpoints: {
      http: ['POST', '/v1/checkpoints:query', '*'],
      request: ['query', ...PAGE, 'order_by'],
    },
    GetExecutionContext: {
      http: ['GET', '/v1/executions/{execution_id}/context', null],
      request: ['execution_id', 'keys', 'include_inherited'],
    },
    UpdateExecutionContext: {
      http: ['PUT', '/v1/executions/{execution_id}/context', '*'],
      request: ['execution_id', 'updates', 'delete_keys', 'expected_version', 'merge_strategy'],
    },
  },
  'svc.tenant.v1.TenantService': {
    CreateApiKey: {
      http: ['POST', '/v1/api-keys', '*'],
      request: ['name', 'scopes', 'expires_in_seconds'],
      response: ['key_secret'],
    },
    ListApiKeys: { http: ['GET', '/v1/api-keys', null], request: [...PAGE] },
    RevokeApiKey: { http: ['DELETE', '/v1/api-keys/{key_id}', null], request: ['key_id'] },
  },
  'svc.brain.v1.SemanticJudgeService': {
    Evaluate: {
      http: ['POST', '/v1/brain/semantic-judge/evaluate', '*'],
      request: ['tenant_id', 'text', 'intent', 'tool_name', 'tool_args', 'context', 'min_confidence'],
      response: ['violated', 'category', 'confidence', 'evidence', 'judge'],
    },
  },
  'svc.brain.v1.OracleService': {
    PredictOverrun: {
      http: ['POST', '/v1/brain/oracle/predict-overrun', '*'],
      request: ['tenant_id', 'budget_id', 'envelope_id', 'workload'],
      response: ['probability', 'expected_spend_at_end', 'method'],
    },
  },
  'svc.brain.v1.ImmuneSystemService': {
    ListDetections: {
      http: ['GET', '/v1/brain/immune-system/detections', null],
      request: ['tenant_id', 'envelope_id', 'execution_id', 'kind', 'start_time', 'end_time', ...PAGE],
      response: ['detections', 'next_page_token'],
    },
  },
};

/** Resource messages and the fields spec section 2 (and spec 4.6 for queries) lists for them. */
const MESSAGES: Record<string, readonly string[]> = {
  'svc.envelope.v1.ExecutionEnvelope': [
    'envelope_id',
    'tenant_id',
    'execution_id',
    'status',
    'governance',
    'created_at',
  ],
  'svc.envelope.v1.GovernanceContext': ['budget_id', 'token_budget', 'cost_limit_usd', 'timeout_seconds'],
  'svc.cost.v1.Budget': [
    'budget_id',
    'tenant_id',
    'workflow_id',
    'limits',
    'thresholds',
    'period',
    'name',
    'description',
    'tags',
  ],
  'svc.cost.v1.BudgetLimits': [
    'max_tokens',
    'max_input_tokens',
    'max_output_tokens',
    'max_cost_usd',
    'max_llm_calls',
    'max_tool_calls',
    'max_execution_time_seconds',
  ],
  'svc.cost.v1.NotificationThreshold': ['threshold_percent'],
  'svc.cost.v1.BudgetPeriod': ['period_type'],
  'svc.cost.v1.CostSummary': [
    'total_input_tokens',
    'total_output_tokens',
    'total_cost_usd',
    'llm_call_count',
    'tool_call_count',
    'model_costs',
  ],
  'svc.cost.v1.ModelCost': ['model_id', 'input_tokens', 'output_tokens', 'cost_usd', 'call_count'],
  'svc.cost.v1.BudgetStatus': [
    'budget_id',
    'status',
    'token_usage_percent',
    'cost_usage_percent',
    'llm_call_usage_percent',
    'tool_call_usage_percent',
    'remaining',
    'current_spend',
    'next_threshold',
  ],
  'svc.cost.v1.Spend': ['total_tokens', 'total_cost_usd', 'total_llm_calls', 'total_tool_calls'],
  'svc.cost.v1.CostPrediction': [
    'estimated_input_tokens',
    'estimated_output_tokens',
    'estimated_total_tokens',
    'estimated_cost_usd',
    'estimated_cost_usd_min',
    'estimated_cost_usd_max',
    'confidence',
    'confidence_level',
    'estimated_duration_seconds',
  ],
  'svc.policy.v1.Policy': [
    'policy_id',
    'tenant_id',
    'name',
    'description',
    'tags',
    'rules',
    'scope',
    'status',
    'enforcement',
    'priority',
  ],
  'svc.policy.v1.PolicyRule': ['rule_id', 'name', 'conditions', 'actions', 'rule_type', 'enabled'],
  'svc.policy.v1.PolicyCondition': ['condition_type', 'field', 'operator', 'values'],
  'svc.policy.v1.PolicyAction': ['action_type', 'message', 'severity'],
  'svc.policy.v1.EvaluationContext': [
    'tenant_id',
    'phase',
    'workflow_id',
    'envelope_id',
    'user_id',
    'user_roles',
    'model_id',
    'tool_names',
    'input_text',
    'output_text',
    'attributes',
    'timestamp',
  ],
  'svc.policy.v1.EvaluationResult': [
    'policy_id',
    'decision',
    'matched_rules',
    'actions',
    'message',
    'evaluation_duration_ms',
  ],
  'svc.policy.v1.MatchedRule': ['rule_id', 'rule_name', 'matched_conditions'],
  'svc.policy.v1.Approval': [
    'approval_id',
    'tenant_id',
    'status',
    'policy_id',
    'rule_id',
    'action',
    'context',
    'envelope_id',
    'created_at',
    'decided_at',
    'reviewer_id',
    'review_note',
  ],
  'svc.checkpoint.v1.Checkpoint': [
    'checkpoint_id',
    'envelope_id',
    'execution_id',
    'tenant_id',
    'version',
    'metadata',
    'data',
  ],
  'svc.checkpoint.v1.CheckpointMetadata': ['type', 'framework_type', 'current_node', 'cost_snapshot_usd', 'tags'],
  'svc.checkpoint.v1.CheckpointQuery': [
    'tenant_ids',
    'envelope_ids',
    'execution_ids',
    'types',
    'created_after',
    'created_before',
    'framework_types',
    'tags',
    'min_cost_usd',
    'max_cost_usd',
    'min_size_bytes',
    'max_size_bytes',
  ],
  'svc.checkpoint.v1.ExecutionContext': ['execution_id', 'version'],
  'svc.tenant.v1.ApiKey': ['id', 'name', 'key_hint', 'scopes', 'expires_at', 'created_at'],
};

const FieldSchema = z.object({ name: z.string(), type: z.string(), typeName: z.string(), label: z.string() });
const MessageDescriptorSchema = z.object({ field: z.array(FieldSchema).default([]) });
const EnumDescriptorSchema = z.object({ value: z.array(z.object({ name: z.string(), number: z.number() })) });

const definition = loadContracts();

function fieldsOf(def: PackageDefinition, message: string) {
  const entry = def[message];
  if (entry === undefined || !('format' in entry) || entry.format !== 'Protocol Buffer 3 DescriptorProto') {
    throw new Error(`no message ${message}`);
  }
  return MessageDescriptorSchema.parse(entry.type).field;
}

function fieldNames(message: string): string[] {
  return fieldsOf(definition, message).map((f) => f.name);
}

/** Enum value names without the UNSPECIFIED zero, after checking that zero. */
function enumValues(name: string): string[] {
  const entry = definition[name];
  if (entry === undefined || !('format' in entry) || entry.format !== 'Protocol Buffer 3 EnumDescriptorProto') {
    throw new Error(`no enum ${name}`);
  }
  const values = EnumDescriptorSchema.parse(entry.type).value;
  const zero = values.find((v) => v.number === 0);
  const prefix =
    name
      .split('.')
      .at(-1)!
      .replace(/(?<!^)([A-Z])/g, '_$1')
      .toUpperCase() + '_';
  expect(zero?.name, name).toBe(`${prefix}UNSPECIFIED`);
  for (const v of values) expect(v.name.startsWith(prefix), v.name).toBe(true);
  return values.filter((v) => v.number !== 0).map((v) => v.name);
}

function service(name: string) {
  const entry = definition[name];
  if (entry === undefined || 'format' in entry) throw new Error(`no service ${name}`);
  return entry;
}

function requestTypeOf(serviceName: string, method: string): string {
  const [pkg] = serviceName.split(/\.(?=[A-Z])/);
  return `${pkg}.${method}Request`;
}

describe('gRPC contracts (spec 4.6)', () => {
  it('loads every contract file with proto-loader, the googleapis imports resolving', () => {
    expect(contractFiles()).toEqual([
      'svc/brain/v1/brain.proto',
      'svc/checkpoint/v1/checkpoint.proto',
      'svc/cost/v1/cost.proto',
      'svc/envelope/v1/envelope.proto',
      'svc/policy/v1/policy.proto',
      'svc/tenant/v1/tenant.proto',
    ]);
    const services = Object.keys(definition).filter(
      (name) => name.startsWith('svc.') && !('format' in definition[name]!),
    );
    expect(services.sort()).toEqual(Object.keys(SERVICES).sort());
  });

  it.each(Object.entries(SERVICES))('%s has exactly the methods of spec 4.6', (name, methods) => {
    expect(Object.keys(service(name)).sort()).toEqual(Object.keys(methods).sort());
  });

  it('carries the google.api.http binding of every mapped method, and no other', () => {
    const expected = Object.entries(SERVICES).flatMap(([name, methods]) =>
      Object.entries(methods).flatMap(([method, { http }]) =>
        http === null ? [] : [{ service: name, method, verb: http[0], path: http[1], body: http[2] }],
      ),
    );
    const key = (r: { service: string; method: string }) => `${r.service}/${r.method}`;
    const sortByKey = <T extends { service: string; method: string }>(rules: T[]) =>
      rules.sort((a, b) => key(a).localeCompare(key(b)));
    expect(sortByKey(listHttpRules(definition))).toEqual(sortByKey(expected));
  });

  it('names the request and response fields as spec 4.6 lists them', () => {
    for (const [name, methods] of Object.entries(SERVICES)) {
      const methodDefinitions = service(name);
      for (const [method, { request, response = [] }] of Object.entries(methods)) {
        const requestType = requestTypeOf(name, method);
        expect(methodDefinitions[method]!.path).toBe(`/${name}/${method}`);
        expect(fieldNames(requestType), requestType).toEqual(expect.arrayContaining([...request]));
        const responseType = requestType.replace(/Request$/, 'Response');
        expect(fieldNames(responseType), responseType).toEqual(expect.arrayContaining([...response]));
      }
    }
  });

  it('paginates every list with page_size, page_token and next_page_token', () => {
    const lists = Object.entries(SERVICES).flatMap(([name, methods]) =>
      Object.keys(methods)
        .filter((m) => m.startsWith('List') || m === 'QueryCheckpoints' || m === 'GetEvaluationHistory')
        .map((m) => requestTypeOf(name, m)),
    );
    expect(lists).toHaveLength(9);
    for (const request of lists) {
      const fields = fieldsOf(definition, request);
      expect(fields.find((f) => f.name === 'page_size')?.type, request).toBe('TYPE_INT32');
      expect(fields.find((f) => f.name === 'page_token')?.type, request).toBe('TYPE_STRING');
      const response = request.replace(/Request$/, 'Response');
      expect(fieldsOf(definition, response).find((f) => f.name === 'next_page_token')?.type, response).toBe(
        'TYPE_STRING',
      );
    }
  });

  it('binds the nested path variables of the updates to the resource ids', () => {
    expect(fieldNames('svc.policy.v1.Policy')).toContain('policy_id');
    expect(fieldNames('svc.cost.v1.Budget')).toContain('budget_id');
    expect(fieldsOf(definition, 'svc.policy.v1.UpdatePolicyRequest').find((f) => f.name === 'policy')?.typeName).toBe(
      'Policy',
    );
    expect(fieldsOf(definition, 'svc.cost.v1.UpdateBudgetRequest').find((f) => f.name === 'budget')?.typeName).toBe(
      'Budget',
    );
    for (const request of ['svc.policy.v1.UpdatePolicyRequest', 'svc.cost.v1.UpdateBudgetRequest']) {
      expect(fieldsOf(definition, request).find((f) => f.name === 'update_mask')?.typeName).toBe(
        'google.protobuf.FieldMask',
      );
    }
  });

  it.each(Object.entries(MESSAGES))('%s has the fields of spec section 2', (message, fields) => {
    expect(fieldNames(message)).toEqual(expect.arrayContaining([...fields]));
  });

  it('keeps the key secret out of the key record: only the create response carries it', () => {
    expect(fieldNames('svc.tenant.v1.ApiKey')).not.toContain('key_secret');
    expect(fieldNames('svc.tenant.v1.ListApiKeysResponse')).not.toContain('key_secret');
    expect(fieldNames('svc.tenant.v1.RevokeApiKeyResponse')).not.toContain('key_secret');
  });

  it('uses Struct, Timestamp and FieldMask where the spec says so', () => {
    const typeOf = (message: string, field: string) =>
      fieldsOf(definition, message).find((f) => f.name === field)?.typeName;
    expect(typeOf('svc.checkpoint.v1.Checkpoint', 'data')).toBe('google.protobuf.Struct');
    expect(typeOf('svc.checkpoint.v1.UpdateExecutionContextRequest', 'updates')).toBe('google.protobuf.Struct');
    expect(typeOf('svc.policy.v1.Approval', 'context')).toBe('google.protobuf.Struct');
    expect(typeOf('svc.envelope.v1.ExecutionEnvelope', 'created_at')).toBe('google.protobuf.Timestamp');
    expect(typeOf('svc.cost.v1.GetSpendSummaryRequest', 'start_time')).toBe('google.protobuf.Timestamp');
    expect(typeOf('svc.checkpoint.v1.CheckpointQuery', 'created_after')).toBe('google.protobuf.Timestamp');
  });
});

describe('gRPC enums map one to one onto the canonical model', () => {
  const strip = (prefix: string, values: string[]) => values.map((v) => v.slice(prefix.length));

  it('EnvelopeStatus holds every canonical envelope status', () => {
    expect(strip('ENVELOPE_STATUS_', enumValues('svc.envelope.v1.EnvelopeStatus'))).toEqual(
      EnvelopeStatusSchema.options,
    );
  });

  it('PolicyStatus, EnforcementLevel and the decisions parse through the canonical input schemas', () => {
    const status = enumValues('svc.policy.v1.PolicyStatus');
    expect(status.map((v) => PolicyStatusInputSchema.parse(v))).toEqual([...POLICY_STATUSES]);
    const enforcement = enumValues('svc.policy.v1.EnforcementLevel');
    expect(enforcement.map((v) => EnforcementInputSchema.parse(v))).toEqual([...ENFORCEMENTS]);
    for (const name of ['svc.policy.v1.EvaluationDecision', 'svc.policy.v1.ActionType']) {
      expect(enumValues(name).map((v) => DecisionInputSchema.parse(v))).toEqual([...DECISIONS]);
    }
  });

  it('ConditionOperator names every canonical operator once (the gRPC column of docs/surfaces.md)', () => {
    const operators = enumValues('svc.policy.v1.ConditionOperator');
    expect(operators.map((v) => OperatorInputSchema.parse(v)).sort()).toEqual([...OPERATORS].sort());
  });

  it('ApprovalStatus, the budget enums and the threshold actions follow the canonical values', () => {
    expect(strip('APPROVAL_STATUS_', enumValues('svc.policy.v1.ApprovalStatus'))).toEqual(ApprovalStatusSchema.options);
    const upper = (values: readonly string[]) => values.map((v) => v.toUpperCase());
    expect(strip('BUDGET_PERIOD_TYPE_', enumValues('svc.cost.v1.BudgetPeriodType'))).toEqual(
      upper(BudgetPeriodSchema.options),
    );
    expect(strip('BUDGET_TYPE_', enumValues('svc.cost.v1.BudgetType'))).toEqual(upper(BudgetTypeSchema.options));
    expect(strip('THRESHOLD_ACTION_', enumValues('svc.cost.v1.ThresholdAction'))).toEqual(
      upper(AlertThresholdSchema.shape.action.unwrap().options),
    );
    expect(strip('BUDGET_STATUS_TYPE_', enumValues('svc.cost.v1.BudgetStatusType'))).toEqual([
      'ACTIVE',
      'WARNING',
      'EXCEEDED',
      'EXPIRED',
    ]);
  });

  it('holds the values the spec shows', () => {
    const shown: Record<string, readonly string[]> = {
      'svc.policy.v1.ExecutionPhase': ['EXECUTION_PHASE_PRE_TOOL_CALL', 'EXECUTION_PHASE_PRE_LLM_CALL'],
      'svc.policy.v1.ConditionType': ['CONDITION_TYPE_IN_LIST'],
      'svc.policy.v1.SeverityLevel': ['SEVERITY_LEVEL_HIGH'],
      'svc.policy.v1.RuleType': ['RULE_TYPE_TOOL_ALLOWLIST'],
      'svc.cost.v1.SpendGroupBy': [
        'SPEND_GROUP_BY_MODEL',
        'SPEND_GROUP_BY_DAY',
        'SPEND_GROUP_BY_WEEK',
        'SPEND_GROUP_BY_MONTH',
        'SPEND_GROUP_BY_WORKFLOW',
      ],
      'svc.checkpoint.v1.CheckpointType': [
        'CHECKPOINT_TYPE_AUTO',
        'CHECKPOINT_TYPE_ERROR',
        'CHECKPOINT_TYPE_PRE_TERMINATE',
      ],
      'svc.checkpoint.v1.MergeStrategy': [
        'MERGE_STRATEGY_LAST_WRITE_WINS',
        'MERGE_STRATEGY_FAIL_ON_CONFLICT',
        'MERGE_STRATEGY_MERGE_RECURSIVE',
        'MERGE_STRATEGY_CUSTOM',
      ],
    };
    for (const [name, values] of Object.entries(shown)) {
      expect(enumValues(name), name).toEqual(expect.arrayContaining([...values]));
    }
  });
});
