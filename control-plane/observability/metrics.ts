import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { EvaluationResult } from '../../core/policy/index.ts';

/** The control plane's Prometheus metrics; names of spec 4.5 where it gives them. */
export class ControlPlaneMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({ name: 'svc_http_requests_total', help: 'REST requests by route and status', labelNames: ['method', 'route', 'status'] as const, registers: [this.registry] });
  readonly httpDuration = new Histogram({ name: 'svc_http_request_duration_seconds', help: 'REST request duration', labelNames: ['method', 'route'] as const, buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1], registers: [this.registry] });
  readonly policyEvaluations = new Counter({ name: 'svc_policy_evaluations_total', help: 'Policy evaluations by decision', labelNames: ['decision'] as const, registers: [this.registry] });
  readonly policyLatency = new Histogram({ name: 'svc_policy_latency_seconds', help: 'Policy evaluation latency', buckets: [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01], registers: [this.registry] });
  readonly budgetUsage = new Gauge({ name: 'svc_budget_usage_dollars', help: 'Spend of the current period per budget', labelNames: ['tenant_id', 'budget_id'] as const, registers: [this.registry] });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  observePolicy(result: EvaluationResult): void {
    this.policyEvaluations.inc({ decision: result.decision });
    this.policyLatency.observe(result.evaluation_time_ms / 1000);
  }
}
