import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { Signals } from '../bus/bus.ts';
import { subjects } from '../bus/subjects.ts';
import { TimestampSchema } from '../domain/timestamp.ts';

const DependencySchema = z.object({ status: z.enum(['ok', 'down']), detail: z.string().optional() });

/** `svc.system.health`: one process's status, as its own health check sees it. */
export const SystemHealthMessageSchema = z.object({
  service: z.enum(['control-plane', 'proxy']),
  /** `<host>:<pid>`: which replica or sidecar speaks. */
  instance: z.string(),
  status: z.enum(['ok', 'degraded', 'down']),
  services: z.record(z.string(), DependencySchema),
  occurred_at: TimestampSchema,
});
export type SystemHealthMessage = z.infer<typeof SystemHealthMessageSchema>;

/**
 * `svc.system.metrics`: the process's Prometheus metrics in brief, one number per metric (the sum
 * over its labels; for a histogram or summary, the number of observations).
 */
export const SystemMetricsMessageSchema = z.object({
  service: z.enum(['control-plane', 'proxy']),
  instance: z.string(),
  uptime_seconds: z.number(),
  metrics: z.record(z.string(), z.number()),
  occurred_at: TimestampSchema,
});
export type SystemMetricsMessage = z.infer<typeof SystemMetricsMessageSchema>;

export type SystemHealth = Pick<SystemHealthMessage, 'status' | 'services'>;

/** One number per metric of the registry (see SystemMetricsMessageSchema). */
export async function metricTotals(registry: Registry): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const metric of await registry.getMetricsAsJSON()) {
    const values = metric.values as Array<{ value: number; metricName?: string }>;
    // A histogram or summary reports `<name>_count` beside its buckets or quantiles and sum.
    const counts = values.filter((v) => v.metricName === `${metric.name}_count`);
    const kept = counts.length > 0 ? counts : values;
    totals[metric.name] = kept.reduce((sum, v) => sum + (Number.isFinite(v.value) ? v.value : 0), 0);
  }
  return totals;
}

/**
 * Publishes the process's health and metrics on `svc.system.health` and `svc.system.metrics`
 * (spec 6.2) every `intervalMs`, first at once; 0 publishes nothing. They are status, not
 * records: plain NATS messages outside the event stream, lost while NATS is away (the next one
 * says how things stand). Returns the stop function.
 */
export function startSystemReports(deps: {
  signals: Signals;
  service: SystemHealthMessage['service'];
  intervalMs: number;
  health: () => Promise<SystemHealth>;
  registry: Registry;
  clock: () => Date;
  logger: { debug(object: Record<string, unknown>, message: string): void };
}): () => void {
  if (deps.intervalMs === 0) return () => undefined;
  const instance = `${hostname()}:${process.pid}`;
  let running = false;
  const report = async () => {
    // A report still on its way (NATS slow) is not overtaken by the next one.
    if (running) return;
    running = true;
    try {
      const at = deps.clock().toISOString();
      const health: SystemHealthMessage = {
        service: deps.service,
        instance,
        ...(await deps.health()),
        occurred_at: at,
      };
      await deps.signals.publishSignal(subjects.systemHealth, health);
      const metrics: SystemMetricsMessage = {
        service: deps.service,
        instance,
        uptime_seconds: Math.round(process.uptime()),
        metrics: await metricTotals(deps.registry),
        occurred_at: at,
      };
      await deps.signals.publishSignal(subjects.systemMetrics, metrics);
    } catch (error) {
      deps.logger.debug({ err: (error as Error).message }, 'system report not published');
    } finally {
      running = false;
    }
  };
  void report();
  const timer = setInterval(() => void report(), deps.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
