import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { EvaluationResult } from '../../core/policy/index.ts';

/** One budget's spend in its current period. */
export interface BudgetSpend {
  tenant_id: string;
  budget_id: string;
  usd: number;
  /** The budget's cost limit, when it has one. */
  limit_usd: number | null;
}

/**
 * Budget figures are read at most this often, every scrape meanwhile sharing the last read: a
 * read walks every tenant's budgets in storage, and scrapes, however many, must not queue one each.
 */
const BUDGET_SPEND_TTL_MS = 10_000;

/**
 * The control plane's Prometheus metrics; names of spec 4.5 where it gives them. `registry`
 * holds the series anyone may read; `tenantRegistry` the per-tenant budget series, which
 * `/metrics` gives only to a scrape bearing the metrics token.
 */
export class ControlPlaneMetrics {
  readonly registry = new Registry();
  readonly tenantRegistry = new Registry();
  readonly httpRequests = new Counter({
    name: 'svc_http_requests_total',
    help: 'REST requests by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'REST request duration',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly policyEvaluations = new Counter({
    name: 'svc_policy_evaluations_total',
    help: 'Policy evaluations by decision',
    labelNames: ['decision'] as const,
    registers: [this.registry],
  });
  readonly policyLatency = new Histogram({
    name: 'svc_policy_latency_seconds',
    help: 'Policy evaluation latency',
    buckets: [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01],
    registers: [this.registry],
  });
  readonly mcpToolCalls = new Counter({
    name: 'svc_mcp_tool_calls_total',
    help: 'MCP tool calls by tool and outcome (ok, the SVC code, or the JSON-RPC error code)',
    labelNames: ['tool', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly immuneDetections = new Counter({
    name: 'svc_immune_detections_total',
    help: 'Immune System detections the control plane stored, by kind (sequence, call_rate, spend)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly foreignClaims = new Counter({
    name: 'svc_envelope_foreign_claims_total',
    help: 'Proxy messages not applied to the envelope they named, which is on another budget than the proxy charged, by what they asked (usage, pause, termination)',
    labelNames: ['claim'] as const,
    registers: [this.registry],
  });
  readonly retentionRemoved = new Counter({
    name: 'svc_retention_removed_total',
    help: 'Records the retention job removed, by kind (events, detections, processed_messages, leases, lease_reports, checkpoints, execution_contexts)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly announcementsLost = new Counter({
    name: 'svc_announcements_lost_total',
    help: 'Counts announced between control-plane replicas that were lost, by subject and reason (not_sent: NATS away or the publication failed; dropped: arrived while the handlers were all busy; refused: arrived and did not validate)',
    labelNames: ['subject', 'reason'] as const,
    registers: [this.registry],
  });
  readonly budgetUsage: Gauge<'tenant_id' | 'budget_id'>;
  readonly budgetLimit: Gauge<'tenant_id' | 'budget_id'>;
  private budgetSpend: () => Promise<Iterable<BudgetSpend>> = () => Promise.resolve([]);
  private spendRead: { at: number; spend: Promise<Iterable<BudgetSpend>> } | null = null;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const spend = () => this.sharedSpend();
    // Read at scrape time from storage, so a period rollover or a budget written by any path
    // (REST events, the event processor) shows without each path having to remember the gauge.
    this.budgetUsage = new Gauge({
      name: 'svc_budget_usage_dollars',
      help: 'Spend of the current period per budget',
      labelNames: ['tenant_id', 'budget_id'] as const,
      registers: [this.tenantRegistry],
      async collect() {
        const budgets = await spend();
        this.reset();
        for (const b of budgets) this.set({ tenant_id: b.tenant_id, budget_id: b.budget_id }, b.usd);
      },
    });
    // Beside the spend, so that "share of the budget spent" is one division in PromQL (alerts).
    this.budgetLimit = new Gauge({
      name: 'svc_budget_limit_dollars',
      help: 'Cost limit per budget (budgets without one are absent)',
      labelNames: ['tenant_id', 'budget_id'] as const,
      registers: [this.tenantRegistry],
      async collect() {
        const budgets = await spend();
        this.reset();
        for (const b of budgets) {
          if (b.limit_usd !== null) this.set({ tenant_id: b.tenant_id, budget_id: b.budget_id }, b.limit_usd);
        }
      },
    });
  }

  /** Where svc_budget_usage_dollars reads each budget's current-period spend from. */
  reportBudgetSpend(source: () => Promise<Iterable<BudgetSpend>>): void {
    this.budgetSpend = source;
    this.spendRead = null;
  }

  /** The metrics in Prometheus's text format; the per-tenant series only with `tenants`. */
  async render(tenants: boolean): Promise<string> {
    const shared = await this.registry.metrics();
    return tenants ? shared + (await this.tenantRegistry.metrics()) : shared;
  }

  private sharedSpend(): Promise<Iterable<BudgetSpend>> {
    const now = Date.now();
    if (this.spendRead === null || now - this.spendRead.at > BUDGET_SPEND_TTL_MS) {
      const spend = this.budgetSpend();
      this.spendRead = { at: now, spend };
      // A failed read is not kept: the next scrape reads again.
      spend.catch(() => {
        if (this.spendRead?.spend === spend) this.spendRead = null;
      });
    }
    return this.spendRead.spend;
  }

  observePolicy(result: EvaluationResult): void {
    this.policyEvaluations.inc({ decision: result.decision });
    this.policyLatency.observe(result.evaluation_time_ms / 1000);
  }
}
