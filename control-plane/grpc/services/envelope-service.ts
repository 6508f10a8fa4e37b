import {
  CreateEnvelopeRequestSchema,
  microsToUsd,
  type CostTotals,
  type Envelope,
} from '../../../core/domain/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import type { Envelopes } from '../../envelopes/envelopes.ts';
import { renamedFields } from '../codec/renamed-fields.ts';
import { enumValue, invalidField, present, requiredId, toStruct, toTimestamp } from '../codec/well-known.ts';
import type { GrpcRequest, GrpcServiceHandlers } from '../server.ts';

export function toGrpcCostSummary(cost: CostTotals) {
  return {
    total_input_tokens: cost.tokens_input,
    total_output_tokens: cost.tokens_output,
    total_cost_usd: microsToUsd(cost.cost_micros),
    llm_call_count: cost.llm_calls,
    tool_call_count: cost.tool_calls,
    model_costs: cost.model_costs.map((m) => ({
      model_id: m.model_id,
      input_tokens: m.input_tokens,
      output_tokens: m.output_tokens,
      cost_usd: microsToUsd(m.cost_micros),
      call_count: m.call_count,
    })),
  };
}

/** The canonical envelope as svc.envelope.v1.ExecutionEnvelope: the precise status, as it is. */
export function toGrpcEnvelope(envelope: Envelope) {
  const { governance } = envelope;
  return {
    envelope_id: envelope.envelope_id,
    tenant_id: envelope.tenant_id,
    execution_id: envelope.execution_id,
    status: `ENVELOPE_STATUS_${envelope.status}`,
    governance: {
      budget_id: envelope.budget_id ?? '',
      ...(governance.token_limit === null ? {} : { token_budget: governance.token_limit }),
      ...(governance.cost_limit_usd === null ? {} : { cost_limit_usd: governance.cost_limit_usd }),
      ...(governance.timeout_seconds === null ? {} : { timeout_seconds: governance.timeout_seconds }),
      policy_set: governance.policy_set,
    },
    created_at: toTimestamp(envelope.created_at),
    status_reason: envelope.status_reason ?? '',
    framework: {
      adapter_type: envelope.adapter_type,
      native_ref: envelope.native_ref ?? '',
      checkpoint_id: envelope.checkpoint_id ?? '',
    },
    metadata: toStruct(envelope.metadata),
    cost_summary: toGrpcCostSummary(envelope.cost),
    updated_at: toTimestamp(envelope.updated_at),
    completed_at: toTimestamp(envelope.completed_at),
  };
}

const CREATE_FIELDS = {
  governance_context: 'governance',
  'governance_context.token_limit': 'governance.token_budget',
  'governance_context.cost_limit_usd': 'governance.cost_limit_usd',
  'governance_context.timeout_seconds': 'governance.timeout_seconds',
};

function sameOrEmpty(field: string, top: readonly string[], nested: readonly string[]): string[] {
  if (nested.length > 0 && top.length > 0 && nested.join('\u0000') !== top.join('\u0000'))
    throw invalidField(field, 'must be empty or equal the request field of the same name');
  return top.length > 0 ? [...top] : [...nested];
}

function createRequest(request: GrpcRequest) {
  const governance = (request.governance ?? {}) as Record<string, unknown>;
  const nestedBudget = present(governance.budget_id);
  const budgetId = present(request.budget_id);
  if (nestedBudget !== undefined && budgetId !== undefined && nestedBudget !== budgetId)
    throw invalidField('governance.budget_id', 'must be empty or equal budget_id');
  const policySet = sameOrEmpty(
    'governance.policy_set',
    request.policy_set as string[],
    (governance.policy_set as string[] | undefined) ?? [],
  );
  const limits = {
    ...(governance.token_budget === undefined ? {} : { token_limit: Number(governance.token_budget) }),
    ...(governance.cost_limit_usd === undefined ? {} : { cost_limit_usd: governance.cost_limit_usd }),
    ...(governance.timeout_seconds === undefined ? {} : { timeout_seconds: Number(governance.timeout_seconds) }),
  };
  const metadata = request.metadata as Record<string, string>;
  return renamedFields(CREATE_FIELDS, () =>
    parseOrThrow(
      CreateEnvelopeRequestSchema,
      {
        adapter_type: request.adapter_type,
        ...((budgetId ?? nestedBudget) === undefined ? {} : { budget_id: budgetId ?? nestedBudget }),
        ...(present(request.execution_id) === undefined ? {} : { execution_id: request.execution_id }),
        ...(policySet.length === 0 ? {} : { policy_set: policySet }),
        ...(Object.keys(metadata).length === 0 ? {} : { metadata }),
        ...(Object.keys(limits).length === 0 ? {} : { governance_context: limits }),
        ...(present(request.native_ref) === undefined ? {} : { native_ref: request.native_ref }),
      },
      'request',
    ),
  );
}

/** svc.envelope.v1.EnvelopeService over the envelope service REST uses. */
export function envelopeService(envelopes: Envelopes): GrpcServiceHandlers {
  return {
    CreateEnvelope: {
      largeRequest: true,
      access: 'envelopes:write',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => ({
        envelope: toGrpcEnvelope(await envelopes.create(caller, createRequest(request), 'PENDING')),
      }),
    },
    GetEnvelope: {
      access: 'envelopes:read',
      handle: async (request, { caller }) => ({
        envelope: toGrpcEnvelope(await envelopes.get(caller.tenant, requiredId(request, 'envelope_id'))),
      }),
    },
    UpdateEnvelopeStatus: {
      access: 'envelopes:write',
      handle: async (request, { caller }) => {
        const status = enumValue(request.status, 'ENVELOPE_STATUS_');
        if (status === undefined) throw invalidField('status', 'required');
        const reason = present(request.reason);
        return {
          envelope: toGrpcEnvelope(
            await envelopes.updateStatus(caller, requiredId(request, 'envelope_id'), {
              status,
              ...(reason === undefined ? {} : { reason }),
            }),
          ),
        };
      },
    },
  };
}
