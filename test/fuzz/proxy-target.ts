import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  metricValue,
  proxyCa,
  proxyProcess,
  removeDirs,
  seedFleetTenant,
  type ControlPlaneProcess,
  type FleetTenant,
  type ProxyProcess,
} from '../harness/processes.ts';

/** A policy as POST /v1/policies takes it. */
export interface PolicyBody {
  name: string;
  rules: { action: string; effect: string }[];
  priority?: number;
}

export interface ProxyTargetOptions {
  /** Made over REST before the proxy starts, so it starts with them in its ruleset. */
  policies: PolicyBody[];
  /** Where every provider host (and MCP server) is sent; goes into the proxy's env as given. */
  env: (budgets: { allowed: string; unbound: string }) => Record<string, string>;
}

export interface ProxyTarget {
  readonly nats: NatsServer;
  readonly cp: ControlPlaneProcess;
  readonly proxy: ProxyProcess;
  readonly tenant: FleetTenant;
  /** A second budget the sidecar is bound to (SVC_ALLOWED_BUDGET_IDS). */
  readonly allowedBudgetId: string;
  /** A budget of the tenant the sidecar is not bound to. */
  readonly unboundBudgetId: string;
  readonly proxyPort: number;
  /** `llm.call` events the proxy published, by `payload.request_id`, as they arrive on NATS. */
  readonly llmCalls: ReadonlyMap<string, UsageEventMessage[]>;
  /** What keeps the run from being healthy: the process down or unready, failure counters, crash output. */
  healthProblems(): Promise<string[]>;
  close(): Promise<void>;
}

/** Log records a fuzz run may produce: the input is hostile, so warnings are expected; errors are not. */
function crashLines(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => {
      let entry: { level?: number; msg?: string };
      try {
        entry = JSON.parse(line) as { level?: number; msg?: string };
      } catch {
        return true; // a stack trace, a Node warning, anything that is not a log record
      }
      return (entry.level ?? 0) >= 50 || /uncaught|unhandled/i.test(entry.msg ?? '');
    });
}

/**
 * A real nats-server, a control-plane process with one seeded tenant and the given policies,
 * and a proxy process (`node proxy/main.ts`) bound to that tenant; `llm.call` events are read
 * off NATS as the proxy publishes them.
 */
export async function startProxyTarget(options: ProxyTargetOptions): Promise<ProxyTarget> {
  const caDir = mkdtempSync(join(tmpdir(), 'fuzz-ca-'));
  let nats: NatsServer | undefined;
  let listener: NatsConnection | undefined;
  let cp: ControlPlaneProcess | undefined;
  let proxy: ProxyProcess | undefined;
  try {
    nats = await startNatsServer();
    cp = await controlPlaneProcess(nats.url);
    await cp.start();
    const tenant = await seedFleetTenant(cp, 'fuzz', { max_cost_usd: 1e9, max_tokens: 1e15 });
    const budget = async (name: string) => {
      const res = await cp!.rest('POST', '/v1/budgets', {
        tenant: tenant.tenantId,
        body: { name, type: 'hybrid', limits: { max_cost_usd: 1e9, max_tokens: 1e15 } },
      });
      if (res.status !== 201) throw new Error(`budget ${name}: ${res.status} ${JSON.stringify(res.body)}`);
      return String(res.body.budget_id);
    };
    const allowedBudgetId = await budget('fuzz-allowed');
    const unboundBudgetId = await budget('fuzz-unbound');
    for (const policy of options.policies) {
      const res = await cp.rest('POST', '/v1/policies', { tenant: tenant.tenantId, body: policy });
      if (res.status !== 201) throw new Error(`policy ${policy.name}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    const llmCalls = new Map<string, UsageEventMessage[]>();
    listener = await connect({ servers: nats.url });
    const subscription = listener.subscribe(`svc.${tenant.tenantId}.events.llm.call`);
    void (async () => {
      for await (const message of subscription) {
        const event = JSON.parse(new TextDecoder().decode(message.data)) as UsageEventMessage;
        const id = String(event.payload.request_id);
        llmCalls.set(id, [...(llmCalls.get(id) ?? []), event]);
      }
    })();
    await listener.flush();
    proxy = await proxyProcess({
      natsUrl: nats.url,
      tenant,
      ca: await proxyCa(caDir),
      openAiUpstream: 'http://127.0.0.1:9',
      env: {
        // Budgets far from any limit: the run is about inputs, not about running out.
        SVC_PROXY_LEASE_USD: '100000',
        SVC_PROXY_LEASE_TOKENS: '100000000000',
        SVC_ALLOWED_BUDGET_IDS: allowedBudgetId,
        ...options.env({ allowed: allowedBudgetId, unbound: unboundBudgetId }),
      },
    });
    await proxy.start();
    const running = { nats, cp, proxy, listener };
    return {
      nats,
      cp,
      proxy,
      tenant,
      allowedBudgetId,
      unboundBudgetId,
      proxyPort: Number(new URL(proxy.proxyUrl).port),
      llmCalls,
      async healthProblems() {
        const problems: string[] = [];
        if (!running.proxy.running) problems.push('the proxy process is not running');
        const ready = await fetch(`${running.proxy.adminUrl}/health/ready`).then(
          (r) => r.status,
          (e: Error) => e.message,
        );
        if (ready !== 200) problems.push(`the proxy is not ready: ${ready}`);
        const metrics = await running.proxy.metrics().catch(() => '');
        for (const name of ['svc_process_unhandled_rejections_total', 'svc_process_uncaught_exceptions_total']) {
          const value = metricValue(metrics, name);
          if (value !== 0) problems.push(`${name} is ${value}`);
        }
        problems.push(...crashLines(running.proxy.output()).map((line) => `proxy output: ${line.slice(0, 2000)}`));
        return problems;
      },
      async close() {
        await running.listener.close();
        await killAllProcesses();
        await running.nats.dispose();
        await removeDirs([caDir, running.cp.dataDir, running.proxy.dataDir]);
      },
    };
  } catch (error) {
    await listener?.close();
    await killAllProcesses();
    await nats?.dispose();
    await removeDirs([caDir, cp?.dataDir, proxy?.dataDir]);
    throw error;
  }
}
