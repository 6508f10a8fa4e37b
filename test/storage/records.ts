import { randomUUID } from 'node:crypto';
import {
  NO_LIMITS,
  emptyCostTotals,
  freshUsage,
  type ApiKeyRecord,
  type Budget,
  type CostTotals,
  type Envelope,
} from '../../core/domain/index.ts';
import {
  RestCreatePolicyRequestSchema,
  policyFromRestCreate,
  type Approval,
  type Policy,
} from '../../core/policy/index.ts';
import type { ImmuneDetection } from '../../core/brain/immune/detection.ts';
import type { AuditDraft } from '../../control-plane/audit/chain.ts';
import type { Checkpoint } from '../../control-plane/checkpoints/checkpoint.ts';
import type { StoredEvent } from '../../control-plane/storage/records.ts';

/** Valid records for storage tests, each with its own id unless one is given. */
export const NOW = new Date('2026-03-10T12:00:00.000Z');
export const at = (offsetMs = 0) => new Date(NOW.getTime() + offsetMs).toISOString();

export function anEnvelope(tenant: string, overrides: Partial<Envelope> = {}): Envelope {
  const id = overrides.envelope_id ?? randomUUID();
  return {
    envelope_id: id,
    tenant_id: tenant,
    budget_id: null,
    execution_id: id,
    adapter_type: 'custom',
    native_ref: null,
    checkpoint_id: null,
    status: 'AUTHORIZED',
    status_reason: null,
    governance: { token_limit: null, cost_limit_usd: null, timeout_seconds: null, policy_set: [] },
    metadata: {},
    cost: emptyCostTotals(),
    created_at: at(),
    updated_at: at(),
    completed_at: null,
    ...overrides,
  };
}

export function aBudget(tenant: string, overrides: Partial<Budget> = {}): Budget {
  const period = overrides.period ?? 'monthly';
  return {
    budget_id: randomUUID(),
    tenant_id: tenant,
    name: 'budget',
    description: '',
    type: 'hybrid',
    period,
    limits: { ...NO_LIMITS },
    alerts: [],
    expires_at: null,
    workflow_id: null,
    tags: {},
    usage: freshUsage({ period, created_at: at() }, NOW),
    created_at: at(),
    updated_at: at(),
    ...overrides,
  };
}

export function aPolicy(tenant: string, name = 'policy'): Policy {
  return policyFromRestCreate(
    RestCreatePolicyRequestSchema.parse({ name, rules: [{ action: 'tool:shell', effect: 'deny' }] }),
    { tenantId: tenant, policyId: randomUUID(), now: NOW },
  );
}

export function anApiKey(tenant: string, id = randomUUID().replaceAll('-', '').slice(0, 16)): ApiKeyRecord {
  return {
    id,
    tenant_id: tenant,
    name: 'key',
    key_hint: 'svc_…abcd',
    key_hash: 'a'.repeat(64),
    scopes: ['admin'],
    expires_at: null,
    created_at: at(),
    revoked_at: null,
    last_used_at: null,
  };
}

export function anApproval(tenant: string): Approval {
  return {
    approval_id: randomUUID(),
    tenant_id: tenant,
    status: 'PENDING',
    policy_id: 'p',
    rule_id: 'r',
    action: 'tool:shell',
    context: {},
    created_at: at(),
  };
}

export function anAuditDraft(action = 'budget.create', actorId = 'k1'): AuditDraft {
  return {
    audit_id: randomUUID(),
    timestamp: at(),
    actor: { type: 'api_key', id: actorId },
    action,
    resource: { type: action.split('.')[0]!, id: 'r' },
    result: 'ok',
    metadata: {},
  };
}

export function anEvent(tenant: string, overrides: Partial<StoredEvent> = {}): StoredEvent {
  return {
    event_id: randomUUID(),
    tenant_id: tenant,
    envelope_id: randomUUID(),
    budget_id: null,
    event_type: 'llm.call',
    timestamp: at(),
    tokens: { input: 10, output: 5 },
    model: 'gpt-4o',
    cost_usd: null,
    payload: {},
    source: 'rest',
    cost_micros: 100,
    received_at: at(),
    ...overrides,
  };
}

/** A cost delta of one call of `model`. */
export function aCharge(model: string | null, tokens = { input: 10, output: 5 }, micros = 100): CostTotals {
  return {
    tokens_input: tokens.input,
    tokens_output: tokens.output,
    cost_micros: micros,
    llm_calls: 1,
    tool_calls: 0,
    model_costs:
      model === null
        ? []
        : [
            {
              model_id: model,
              input_tokens: tokens.input,
              output_tokens: tokens.output,
              cost_micros: micros,
              call_count: 1,
            },
          ],
  };
}

export function aCheckpoint(tenant: string, overrides: Partial<Checkpoint> = {}): Checkpoint {
  const data = overrides.data ?? { step: 1, messages: ['hello'] };
  return {
    checkpoint_id: randomUUID(),
    tenant_id: tenant,
    envelope_id: 'env-1',
    execution_id: 'exec-1',
    version: 1,
    metadata: { type: 'AUTO', framework_type: 'langgraph', current_node: 'plan', cost_snapshot_usd: 0.5, tags: {} },
    data,
    size_bytes: Buffer.byteLength(JSON.stringify(data)),
    created_at: at(),
    deleted_at: null,
    ...overrides,
  };
}

export function aDetection(tenant: string, overrides: Partial<ImmuneDetection> = {}): ImmuneDetection {
  return {
    detection_id: randomUUID(),
    tenant_id: tenant,
    kind: 'call_rate',
    category: null,
    envelope_id: 'env-1',
    execution_id: 'exec-1',
    action: null,
    policy_id: null,
    rule_id: null,
    response: 'alert',
    details: { count: 40, baseline: 3, z: 7.5 },
    source: 'proxy:pod-1',
    detected_at: at(),
    recorded_at: at(),
    ...overrides,
  };
}
