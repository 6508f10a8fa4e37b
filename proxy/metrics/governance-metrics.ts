import { Counter, Histogram, type Registry } from 'prom-client';
import { createModelLabels, type ModelLabels } from './model-labels.ts';

export type CutoffReason = 'budget' | 'terminated' | 'policy' | 'oversize';
export type UsageDirection = 'input' | 'output';

/** Per-pod governance metrics (ARCHITECTURE §11); model labels are capped by ModelLabels. */
export interface GovernanceMetrics {
  models: ModelLabels;
  requests: Counter<'provider' | 'model' | 'decision'>;
  tokens: Counter<'provider' | 'model' | 'direction'>;
  cost: Counter<'provider' | 'model'>;
  cutoffs: Counter<'provider' | 'reason'>;
  unclassified: Counter<'provider' | 'outcome'>;
  unknownModels: Counter<'provider'>;
  toolCalls: Counter<'source' | 'decision'>;
  policyEvaluations: Counter<'decision'>;
  policyLatency: Histogram;
  leaseRequests: Counter<'outcome'>;
}

/** `listed`: whether the price table lists a model under exactly this name (see ModelLabels). */
export function createGovernanceMetrics(
  registry: Registry,
  modelLabelCap: number,
  listed: (model: string) => boolean,
): GovernanceMetrics {
  const registers = [registry];
  return {
    models: createModelLabels(modelLabelCap, listed),
    requests: new Counter({
      name: 'svc_proxy_requests_total',
      help: 'Governed LLM calls by provider, model and decision',
      labelNames: ['provider', 'model', 'decision'],
      registers,
    }),
    tokens: new Counter({
      name: 'svc_proxy_tokens_total',
      help: 'Tokens metered, input and output',
      labelNames: ['provider', 'model', 'direction'],
      registers,
    }),
    cost: new Counter({
      name: 'svc_proxy_cost_usd_total',
      help: 'Cost metered in USD',
      labelNames: ['provider', 'model'],
      registers,
    }),
    cutoffs: new Counter({
      name: 'svc_proxy_cutoffs_total',
      help: 'Streamed answers cut before their end, by reason',
      labelNames: ['provider', 'reason'],
      registers,
    }),
    unclassified: new Counter({
      name: 'svc_proxy_unclassified_requests_total',
      help: 'Requests on a provider host outside its routes, by outcome (metered by estimate, refused, or a free read)',
      labelNames: ['provider', 'outcome'],
      registers,
    }),
    unknownModels: new Counter({
      name: 'svc_proxy_unknown_model_calls_total',
      help: 'Calls to a model missing from the price table (priced by the unknown-model rule, or refused under deny)',
      labelNames: ['provider'],
      registers,
    }),
    toolCalls: new Counter({
      name: 'svc_proxy_tool_calls_total',
      help: 'Tool calls seen (asked for by a model, or MCP tools/call), by decision',
      labelNames: ['source', 'decision'],
      registers,
    }),
    policyEvaluations: new Counter({
      name: 'svc_policy_evaluations_total',
      help: 'Policy evaluations in this proxy by decision',
      labelNames: ['decision'],
      registers,
    }),
    policyLatency: new Histogram({
      name: 'svc_policy_latency_seconds',
      help: 'Local policy evaluation time',
      buckets: [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01],
      registers,
    }),
    leaseRequests: new Counter({
      name: 'svc_proxy_lease_requests_total',
      help: 'Budget lease requests to the control plane by outcome',
      labelNames: ['outcome'],
      registers,
    }),
  };
}
